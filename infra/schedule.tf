# Scheduled jobs: EventBridge runs each {name, schedule, sql} through the coordinator with
# the input {"sql": ..., "format": "json", "job": NAME}. EventBridge invokes Lambda
# asynchronously, so a run can fail in two places, and both end in one queue:
#   - delivery (throttled, function missing): EventBridge retries, then the rule target's
#     dead_letter_config;
#   - the query (bad SQL, S3 denied, timeout): Lambda retries, then the on-failure
#     destination, a message that carries the input and the error.
# Each run's log is in the coordinator's log group (its input names the job), and an
# alarm fires while the queue holds messages.

locals {
  jobs         = { for job in var.scheduled_jobs : job.name => job }
  jobs_enabled = length(var.scheduled_jobs) > 0
}

resource "aws_sqs_queue" "jobs_dead_letters" {
  count = local.jobs_enabled ? 1 : 0

  name = "${var.name}-job-dead-letters"
  # 14 days, SQS's maximum: time to notice a failed nightly run and replay it.
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

# EventBridge sends undeliverable events with the queue's policy, not a role; only this
# module's job rules may.
data "aws_iam_policy_document" "jobs_dead_letters" {
  count = local.jobs_enabled ? 1 : 0

  statement {
    sid       = "UndeliveredJobRuns"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.jobs_dead_letters[0].arn]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [for rule in aws_cloudwatch_event_rule.job : rule.arn]
    }
  }
}

resource "aws_sqs_queue_policy" "jobs_dead_letters" {
  count = local.jobs_enabled ? 1 : 0

  queue_url = aws_sqs_queue.jobs_dead_letters[0].id
  policy    = data.aws_iam_policy_document.jobs_dead_letters[0].json
}

resource "aws_cloudwatch_event_rule" "job" {
  for_each = local.jobs

  name                = "${var.name}-${each.key}"
  description         = "Quiver scheduled job ${each.key}"
  schedule_expression = each.value.schedule
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "job" {
  for_each = local.jobs

  rule      = aws_cloudwatch_event_rule.job[each.key].name
  target_id = "quiver-coordinator"
  arn       = aws_lambda_function.coordinator.arn
  input = jsonencode({
    sql    = each.value.sql
    format = "json"
    job    = each.key
  })

  retry_policy {
    maximum_retry_attempts       = var.job_retries
    maximum_event_age_in_seconds = var.job_max_event_age_seconds
  }

  dead_letter_config {
    arn = aws_sqs_queue.jobs_dead_letters[0].arn
  }

  depends_on = [aws_sqs_queue_policy.jobs_dead_letters]
}

# Each rule may invoke the coordinator, and nothing else through this grant.
resource "aws_lambda_permission" "job" {
  for_each = local.jobs

  statement_id  = "QuiverJob-${each.key}"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.coordinator.function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.job[each.key].arn
}

# Applies to every asynchronous invocation of the coordinator; only the jobs make them.
resource "aws_lambda_function_event_invoke_config" "coordinator" {
  count = local.jobs_enabled ? 1 : 0

  function_name                = aws_lambda_function.coordinator.function_name
  maximum_retry_attempts       = var.job_retries
  maximum_event_age_in_seconds = var.job_max_event_age_seconds

  destination_config {
    on_failure {
      destination = aws_sqs_queue.jobs_dead_letters[0].arn
    }
  }

  # Lambda checks that the role may send to the destination when this is set.
  depends_on = [aws_iam_role_policy.coordinator_dead_letters]
}

resource "aws_cloudwatch_metric_alarm" "jobs_dead_letters" {
  count = local.jobs_enabled ? 1 : 0

  alarm_name          = "${var.name}-job-failed"
  alarm_description   = "A Quiver scheduled job run failed: its input and error are in ${aws_sqs_queue.jobs_dead_letters[0].name}, its log in ${aws_cloudwatch_log_group.coordinator.name}."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.jobs_dead_letters[0].name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  tags                = var.tags
}
