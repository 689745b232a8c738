# The two functions, built by scripts/build-lambda.sh (cargo lambda build --release
# --arm64): a custom runtime whose executable is "bootstrap" in each zip.
#
# checkov checks that do not apply are skipped inside each resource, with the reason.

locals {
  # Read by both functions: where outputs over the response limit go.
  common_environment = {
    QUIVER_RESULT_PREFIX = local.result_uri
    RUST_LOG             = var.log_level
    # Half of /tmp keeps remote bytes for the next requests; the rest is for spills.
    QUIVER_DISK_CACHE_BYTES = tostring(floor(var.ephemeral_storage_mb / 2) * 1048576)
  }
}

resource "aws_lambda_function" "worker" {
  #checkov:skip=CKV_AWS_50:X-Ray needs Resource "*" in the role (no resource-level permissions); the functions log per-phase timings.
  #checkov:skip=CKV_AWS_116:Invoked synchronously by the coordinator only, which retries failed workers; a DLQ applies to asynchronous invocations.
  #checkov:skip=CKV_AWS_117:Reaches only S3 and Lambda over public endpoints; a VPC would need NAT or endpoints this module cannot know.
  #checkov:skip=CKV_AWS_173:Environment holds S3 prefixes and tuning numbers, no secret; encrypted at rest with Lambda's key.
  #checkov:skip=CKV_AWS_272:Built from source by whoever applies (scripts/build-lambda.sh); no signing profile to verify against.
  function_name = local.worker_name
  description   = "Quiver worker: runs a query fragment over its row-group buckets"
  role          = aws_iam_role.worker.arn

  filename         = var.worker_zip
  source_code_hash = filebase64sha256(var.worker_zip)
  handler          = "bootstrap"
  runtime          = "provided.al2023"
  architectures    = ["arm64"]

  memory_size                    = var.worker_memory_mb
  timeout                        = var.worker_timeout_seconds
  reserved_concurrent_executions = var.worker_reserved_concurrency

  ephemeral_storage {
    size = var.ephemeral_storage_mb
  }

  environment {
    variables = local.common_environment
  }

  tags = var.tags

  # The log group and the right to write to it exist before the first invocation.
  depends_on = [aws_cloudwatch_log_group.worker, aws_iam_role_policy.worker]

  lifecycle {
    precondition {
      condition     = var.create_results_bucket != (var.result_location != null)
      error_message = "Set exactly one of result_location (an existing s3://BUCKET/PREFIX/) and create_results_bucket = true."
    }
  }
}

resource "aws_lambda_function" "coordinator" {
  #checkov:skip=CKV_AWS_50:X-Ray needs Resource "*" in the role (no resource-level permissions); the functions log per-phase timings.
  #checkov:skip=CKV_AWS_116:Asynchronous (scheduled job) failures go to an on-failure destination, the jobs' dead-letter queue (schedule.tf), which keeps the error too.
  #checkov:skip=CKV_AWS_117:Reaches only S3 and Lambda over public endpoints; a VPC would need NAT or endpoints this module cannot know.
  #checkov:skip=CKV_AWS_173:Environment holds S3 prefixes, a function name and tuning numbers, no secret; encrypted at rest with Lambda's key.
  #checkov:skip=CKV_AWS_272:Built from source by whoever applies (scripts/build-lambda.sh); no signing profile to verify against.
  function_name = local.coordinator_name
  description   = "Quiver coordinator: plans queries and fans them out to workers"
  role          = aws_iam_role.coordinator.arn

  filename         = var.coordinator_zip
  source_code_hash = filebase64sha256(var.coordinator_zip)
  handler          = "bootstrap"
  runtime          = "provided.al2023"
  architectures    = ["arm64"]

  memory_size                    = var.coordinator_memory_mb
  timeout                        = var.coordinator_timeout_seconds
  reserved_concurrent_executions = var.coordinator_reserved_concurrency

  ephemeral_storage {
    size = var.ephemeral_storage_mb
  }

  # The coordinator finds its own name (for sub-coordinators) in AWS_LAMBDA_FUNCTION_NAME.
  environment {
    variables = merge(local.common_environment, {
      QUIVER_WORKER_FUNCTION  = aws_lambda_function.worker.function_name
      QUIVER_MAX_WORKERS      = tostring(var.max_workers)
      QUIVER_BYTES_PER_WORKER = tostring(var.bytes_per_worker)
      QUIVER_TREE_THRESHOLD   = tostring(var.tree_threshold)
      QUIVER_WORKER_RETRIES   = tostring(var.worker_retries)
      QUIVER_WORKER_MEMORY_MB = tostring(var.worker_memory_mb)
    })
  }

  tags = var.tags

  depends_on = [aws_cloudwatch_log_group.coordinator, aws_iam_role_policy.coordinator]

  lifecycle {
    precondition {
      condition     = var.coordinator_timeout_seconds > var.worker_timeout_seconds
      error_message = "coordinator_timeout_seconds must exceed worker_timeout_seconds: the coordinator waits for its workers."
    }
  }
}
