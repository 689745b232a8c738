"""Test servers: a range-capable static HTTP server and a counting S3 proxy; wrappers of MinIO
(scripts/minio.sh) and of cargo-lambda's emulator, shared by the tests and the benchmarks."""
