DROP FUNCTION live_table_id(text, text);
