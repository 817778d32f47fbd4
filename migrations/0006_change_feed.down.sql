DROP TABLE change_feed;
DROP TABLE changes;
