DROP TABLE storage_gc_cursor;
