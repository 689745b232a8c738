output "function_url" {
  value = module.quiver.function_url
}

output "coordinator_function_name" {
  value = module.quiver.coordinator_function_name
}

output "result_location" {
  value = module.quiver.result_location
}

output "jobs_dead_letter_queue_url" {
  value = module.quiver.jobs_dead_letter_queue_url
}

output "client_policy_json" {
  value = module.quiver.client_policy_json
}
