"""Test servers: a range-capable static HTTP server and a counting S3 proxy."""
