# Execution roles, least privilege. Each function may:
#   - s3:GetObject under the data prefixes, and s3:ListBucket on their buckets for those
#     prefixes only;
#   - s3:GetObject, PutObject and DeleteObject under the result prefix (workers spill
#     large outputs there, the coordinator reads and deletes them);
#   - s3:PutObject and DeleteObject under the write locations (COPY ... TO);
#   - write its own log group.
# The coordinator may also invoke the worker and itself (sub-coordinators), and send
# failed job runs to the dead-letter queue (schedule.tf).
#
# No managed policy is attached: AWSLambdaBasicExecutionRole would allow logs on "*".
# tests/test_infra.py reads these documents and fails on any grant beyond this list.

data "aws_iam_policy_document" "lambda_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "worker" {
  name               = local.worker_name
  description        = "Quiver worker: reads Parquet row groups and spills large outputs"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
  tags               = var.tags
}

resource "aws_iam_role" "coordinator" {
  name               = local.coordinator_name
  description        = "Quiver coordinator: plans queries and invokes workers"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
  tags               = var.tags
}

# S3 access, the same for both functions: the coordinator reads footers and lists to
# plan, workers read row groups; either may write COPY outputs.
data "aws_iam_policy_document" "s3_access" {
  statement {
    sid       = "ReadData"
    actions   = ["s3:GetObject"]
    resources = local.data_object_arns
  }

  # One statement per bucket, so that a bucket's prefixes do not open another's.
  dynamic "statement" {
    for_each = local.data_buckets
    content {
      actions   = ["s3:ListBucket"]
      resources = ["arn:${local.partition}:s3:::${statement.key}"]

      dynamic "condition" {
        for_each = length(statement.value) > 0 ? [statement.value] : []
        content {
          test     = "StringLike"
          variable = "s3:prefix"
          values   = condition.value
        }
      }
    }
  }

  # No s3:ListBucket here: the coordinator reads the keys its workers report.
  statement {
    sid       = "SpilledResults"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
    resources = [local.result_object_arn]
  }

  dynamic "statement" {
    for_each = length(local.write_object_arns) > 0 ? [local.write_object_arns] : []
    content {
      sid       = "CopyOutputs"
      actions   = ["s3:PutObject", "s3:DeleteObject"]
      resources = statement.value
    }
  }
}

data "aws_iam_policy_document" "worker" {
  source_policy_documents = [data.aws_iam_policy_document.s3_access.json]

  # The ":*" suffix covers the group's log streams (PutLogEvents acts on a stream).
  statement {
    sid       = "OwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.worker.arn}:*"]
  }
}

data "aws_iam_policy_document" "coordinator" {
  source_policy_documents = [data.aws_iam_policy_document.s3_access.json]

  statement {
    sid       = "OwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.coordinator.arn}:*"]
  }

  # The unqualified ARN: the coordinator invokes $LATEST by name (QUIVER_WORKER_FUNCTION).
  statement {
    sid       = "InvokeWorkers"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.worker.arn]
  }
}

resource "aws_iam_role_policy" "worker" {
  name   = "quiver-worker"
  role   = aws_iam_role.worker.id
  policy = data.aws_iam_policy_document.worker.json
}

resource "aws_iam_role_policy" "coordinator" {
  name   = "quiver-coordinator"
  role   = aws_iam_role.coordinator.id
  policy = data.aws_iam_policy_document.coordinator.json
}

# Tree invocation: above tree_threshold workers the coordinator invokes copies of itself.
# A separate policy, attached once the function exists: putting the function's own ARN in
# the policy above would make the function depend on itself.
data "aws_iam_policy_document" "coordinator_self" {
  statement {
    sid       = "InvokeSubCoordinators"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.coordinator.arn]
  }
}

resource "aws_iam_role_policy" "coordinator_self" {
  name   = "quiver-coordinator-self"
  role   = aws_iam_role.coordinator.id
  policy = data.aws_iam_policy_document.coordinator_self.json
}

# Failed job runs: Lambda sends them to the on-failure destination (schedule.tf) with the
# function's own role. Only when there are scheduled jobs.
data "aws_iam_policy_document" "coordinator_dead_letters" {
  count = local.jobs_enabled ? 1 : 0

  statement {
    sid       = "FailedJobRuns"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.jobs_dead_letters[0].arn]
  }
}

resource "aws_iam_role_policy" "coordinator_dead_letters" {
  count = local.jobs_enabled ? 1 : 0

  name   = "quiver-coordinator-dead-letters"
  role   = aws_iam_role.coordinator.id
  policy = data.aws_iam_policy_document.coordinator_dead_letters[0].json
}
