output "function_url" {
  description = "The coordinator's URL (ends in /): POST query, GET health."
  value       = aws_lambda_function_url.coordinator.function_url
}

output "function_url_auth_type" {
  description = "AWS_IAM (sign requests with SigV4, service lambda) or NONE."
  value       = aws_lambda_function_url.coordinator.authorization_type
}

output "coordinator_function_name" {
  description = "For aws lambda invoke."
  value       = aws_lambda_function.coordinator.function_name
}

output "coordinator_function_arn" {
  value = aws_lambda_function.coordinator.arn
}

output "worker_function_name" {
  value = aws_lambda_function.worker.function_name
}

output "worker_function_arn" {
  value = aws_lambda_function.worker.arn
}

output "coordinator_role_arn" {
  value = aws_iam_role.coordinator.arn
}

output "worker_role_arn" {
  value = aws_iam_role.worker.arn
}

output "result_location" {
  description = "s3://BUCKET/PREFIX/ where large outputs spill (QUIVER_RESULT_PREFIX)."
  value       = local.result_uri
}

output "results_bucket" {
  description = "The results bucket made by this module, or null."
  value       = var.create_results_bucket ? aws_s3_bucket.results[0].id : null
}

output "log_group_names" {
  value = {
    worker      = aws_cloudwatch_log_group.worker.name
    coordinator = aws_cloudwatch_log_group.coordinator.name
  }
}

output "jobs_dead_letter_queue_url" {
  description = "Failed scheduled job runs land here (null without scheduled jobs)."
  value       = local.jobs_enabled ? aws_sqs_queue.jobs_dead_letters[0].url : null
}

output "jobs_dead_letter_queue_arn" {
  value = local.jobs_enabled ? aws_sqs_queue.jobs_dead_letters[0].arn : null
}

output "client_policy_json" {
  description = "An identity policy that lets a user or role query this deployment: through the AWS_IAM function URL (both actions are required since October 2025) or by direct invoke."
  value       = data.aws_iam_policy_document.client.json
}
