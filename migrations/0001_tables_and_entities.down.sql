DROP TABLE entities;
DROP TABLE tables;
