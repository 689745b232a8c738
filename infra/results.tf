# Where workers spill outputs too large for a Lambda response (6 MB): an existing prefix
# (result_location) or a private bucket made here whose lifecycle rule expires them.

locals {
  result_bucket     = var.create_results_bucket ? aws_s3_bucket.results[0].id : try(local.result_location.bucket, "")
  result_prefix     = var.create_results_bucket ? var.results_prefix : try(local.result_location.prefix, "")
  result_uri        = "s3://${local.result_bucket}/${local.result_prefix}"
  result_object_arn = "arn:${local.partition}:s3:::${local.result_bucket}/${local.result_prefix}*"
}

resource "aws_s3_bucket" "results" {
  #checkov:skip=CKV_AWS_18:Access logs would record every spill write and read of short-lived query outputs; CloudTrail data events can be enabled account-wide instead.
  #checkov:skip=CKV_AWS_21:Versioning off on purpose: spilled outputs are written once, read once and deleted; versioning would keep each deleted output as a noncurrent version.
  #checkov:skip=CKV_AWS_144:Cross-region replication of outputs that live minutes has no use.
  #checkov:skip=CKV_AWS_145:SSE-S3 encrypts every object; a KMS key would add kms:Decrypt and kms:GenerateDataKey to both roles and a KMS request per spill.
  #checkov:skip=CKV2_AWS_62:Nothing reacts to spilled outputs; the coordinator reads the keys its workers return.
  count = var.create_results_bucket ? 1 : 0

  bucket_prefix = "${var.name}-results-"
  force_destroy = var.results_bucket_force_destroy
  tags          = var.tags
}

resource "aws_s3_bucket_public_access_block" "results" {
  count = var.create_results_bucket ? 1 : 0

  bucket                  = aws_s3_bucket.results[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

# No ACLs: the bucket owner owns every object, whichever role wrote it.
resource "aws_s3_bucket_ownership_controls" "results" {
  count = var.create_results_bucket ? 1 : 0

  bucket = aws_s3_bucket.results[0].id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "results" {
  count = var.create_results_bucket ? 1 : 0

  bucket = aws_s3_bucket.results[0].id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

# The coordinator deletes what it has read; this removes what failed queries left behind.
resource "aws_s3_bucket_lifecycle_configuration" "results" {
  count = var.create_results_bucket ? 1 : 0

  bucket = aws_s3_bucket.results[0].id

  rule {
    id     = "expire-spilled-results"
    status = "Enabled"

    filter {
      prefix = var.results_prefix
    }

    expiration {
      days = var.results_expiration_days
    }
  }

  # Parts of uploads that never completed are billed until aborted, under any key.
  rule {
    id     = "abort-incomplete-uploads"
    status = "Enabled"

    filter {}

    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}

# A page that sent its query to the function URL GETs an answer over 6 MB from here, by the
# presigned URL the coordinator gave it: the same origins as the function URL, GET only.
resource "aws_s3_bucket_cors_configuration" "results" {
  count = var.create_results_bucket ? 1 : 0

  bucket = aws_s3_bucket.results[0].id
  cors_rule {
    allowed_origins = var.cors_allow_origins
    allowed_methods = ["GET"]
    allowed_headers = []
    max_age_seconds = var.cors_max_age_seconds
  }
}
