DROP TABLE service_properties;
DROP TABLE table_acls;
