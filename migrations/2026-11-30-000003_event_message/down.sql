DROP FUNCTION quire_event_message(uuid, uuid, uuid, text, uuid);
