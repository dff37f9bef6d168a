DROP FUNCTION IF EXISTS quire_same_content(uuid, text);
