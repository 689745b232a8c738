# Inputs of the Quiver module. Validations may only look at their own variable in
# Terraform 1.5; rules that relate two variables are preconditions in lambda.tf.

variable "name" {
  description = "Prefix of every resource name: functions NAME-worker and NAME-coordinator, their roles and log groups, the job rules and queue, the results bucket."
  type        = string
  default     = "quiver"

  validation {
    # Lower case because the results bucket name starts with it; 24 characters keep
    # the bucket prefix (NAME-results-) within S3's 37-character bucket_prefix limit.
    condition     = can(regex("^[a-z][a-z0-9-]{0,23}$", var.name))
    error_message = "name must be 1-24 characters of a-z, 0-9 and -, starting with a letter."
  }
}

variable "tags" {
  description = "Tags added to every resource that takes tags."
  type        = map(string)
  default     = {}
}

# Code

variable "worker_zip" {
  description = "Path of the worker's bootstrap.zip from scripts/build-lambda.sh (dist/lambda/worker/bootstrap.zip)."
  type        = string

  validation {
    condition     = endswith(var.worker_zip, ".zip")
    error_message = "worker_zip must be the path of a .zip file."
  }
}

variable "coordinator_zip" {
  description = "Path of the coordinator's bootstrap.zip from scripts/build-lambda.sh (dist/lambda/coordinator/bootstrap.zip)."
  type        = string

  validation {
    condition     = endswith(var.coordinator_zip, ".zip")
    error_message = "coordinator_zip must be the path of a .zip file."
  }
}

# Data the functions read and write

variable "data_locations" {
  description = "S3 URIs the functions may read, e.g. [\"s3://my-bucket/tpch/\", \"s3://other-bucket\"]. A URI grants s3:GetObject on every key that starts with its prefix (end it with / to keep to one folder) and s3:ListBucket on its bucket for those prefixes only; a bare bucket grants the whole bucket."
  type        = list(string)

  validation {
    condition     = length(var.data_locations) > 0
    error_message = "data_locations needs at least one S3 URI."
  }

  validation {
    # No * or ? in the prefix: they would become wildcards in the policy's ARNs.
    condition     = alltrue([for uri in var.data_locations : can(regex("^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^*?]*)?$", uri))])
    error_message = "Each data location must be s3://BUCKET or s3://BUCKET/PREFIX, without * or ?."
  }
}

variable "write_locations" {
  description = "S3 URIs that COPY ... TO may write (s3:PutObject and s3:DeleteObject on keys under each prefix), e.g. [\"s3://my-bucket/reports/\"]. Empty: queries cannot write outside the result prefix."
  type        = list(string)
  default     = []

  validation {
    # A prefix is required: a bare bucket would let COPY overwrite or delete anything in it.
    condition     = alltrue([for uri in var.write_locations : can(regex("^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[^*?]+$", uri))])
    error_message = "Each write location must be s3://BUCKET/PREFIX with a non-empty prefix and without * or ?."
  }
}

variable "result_location" {
  description = "Existing S3 URI (s3://BUCKET/PREFIX/) where workers spill outputs too large for a Lambda response and the coordinator reads and deletes them. Give this or set create_results_bucket; an expiration rule on the prefix is then yours to add."
  type        = string
  default     = null

  validation {
    # The functions may delete under this prefix, so it must not be a whole bucket.
    condition     = var.result_location == null ? true : can(regex("^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[^*?]+/$", var.result_location))
    error_message = "result_location must be s3://BUCKET/PREFIX/: a non-empty prefix ending in /, without * or ?."
  }
}

variable "create_results_bucket" {
  description = "Create a private bucket for spilled results, with a lifecycle rule that expires them (instead of giving result_location)."
  type        = bool
  default     = false
}

variable "results_prefix" {
  description = "Key prefix of spilled results in the created results bucket."
  type        = string
  default     = "spill/"

  validation {
    condition     = can(regex("^[^*?/][^*?]*/$", var.results_prefix))
    error_message = "results_prefix must be a non-empty key prefix ending in /, without * or ?."
  }
}

variable "results_expiration_days" {
  description = "Days after which spilled results in the created bucket expire. The coordinator deletes what it read; this removes what a failed query left."
  type        = number
  default     = 1

  validation {
    condition     = var.results_expiration_days >= 1 && floor(var.results_expiration_days) == var.results_expiration_days
    error_message = "results_expiration_days must be a whole number of days, at least 1."
  }
}

variable "results_bucket_force_destroy" {
  description = "Let terraform destroy delete the created results bucket while it still holds objects."
  type        = bool
  default     = false
}

# Functions

variable "worker_memory_mb" {
  description = "Worker memory in MB; Lambda gives CPU in proportion (1,769 MB is one vCPU), and a worker decodes Parquet on all of them."
  type        = number
  default     = 2048

  validation {
    condition     = var.worker_memory_mb >= 128 && var.worker_memory_mb <= 10240
    error_message = "worker_memory_mb must be between 128 and 10240."
  }
}

variable "ephemeral_storage_mb" {
  description = "Each function's /tmp in MB: half keeps remote bytes between requests (the disk cache), the rest holds spills."
  type        = number
  default     = 2048

  validation {
    condition     = var.ephemeral_storage_mb >= 512 && var.ephemeral_storage_mb <= 10240
    error_message = "ephemeral_storage_mb must be between 512 and 10240."
  }
}

variable "coordinator_memory_mb" {
  description = "Coordinator memory in MB: it plans, reads footers and merges the workers' partial results."
  type        = number
  default     = 2048

  validation {
    condition     = var.coordinator_memory_mb >= 128 && var.coordinator_memory_mb <= 10240
    error_message = "coordinator_memory_mb must be between 128 and 10240."
  }
}

variable "worker_timeout_seconds" {
  description = "Worker timeout in seconds. A worker that times out is retried (worker_retries)."
  type        = number
  default     = 120

  validation {
    condition     = var.worker_timeout_seconds >= 1 && var.worker_timeout_seconds <= 900
    error_message = "worker_timeout_seconds must be between 1 and 900."
  }
}

variable "coordinator_timeout_seconds" {
  description = "Coordinator timeout in seconds; must exceed worker_timeout_seconds, since it waits for its workers (and sub-coordinators)."
  type        = number
  default     = 300

  validation {
    condition     = var.coordinator_timeout_seconds >= 1 && var.coordinator_timeout_seconds <= 900
    error_message = "coordinator_timeout_seconds must be between 1 and 900."
  }
}

variable "worker_reserved_concurrency" {
  description = "Reserved concurrent executions of the worker; -1 reserves none. A reservation caps cost, but Lambda refuses one that leaves the account less than 100 unreserved, and it throttles concurrent queries that together need more workers."
  type        = number
  default     = -1

  validation {
    condition     = var.worker_reserved_concurrency >= -1
    error_message = "worker_reserved_concurrency must be -1 (no reservation) or at least 0."
  }
}

variable "coordinator_reserved_concurrency" {
  description = "Reserved concurrent executions of the coordinator; -1 reserves none. Sub-coordinators of large queries (tree invocation) count against it."
  type        = number
  default     = -1

  validation {
    condition     = var.coordinator_reserved_concurrency >= -1
    error_message = "coordinator_reserved_concurrency must be -1 (no reservation) or at least 0."
  }
}

variable "log_level" {
  description = "RUST_LOG of both functions (error, warn, info, debug, trace, or a filter such as quiver_core=debug)."
  type        = string
  default     = "info"
}

# Fan-out (the coordinator's defaults; a query may change them with SET lambda.*)

variable "max_workers" {
  description = "Most workers one scan fans out to (QUIVER_MAX_WORKERS)."
  type        = number
  default     = 64

  validation {
    condition     = var.max_workers >= 1
    error_message = "max_workers must be at least 1."
  }
}

variable "bytes_per_worker" {
  description = "Bytes of Parquet one worker reads when the coordinator derives the worker count (QUIVER_BYTES_PER_WORKER); 256 MiB by default."
  type        = number
  default     = 268435456

  validation {
    condition     = var.bytes_per_worker >= 1048576
    error_message = "bytes_per_worker must be at least 1 MiB."
  }
}

variable "tree_threshold" {
  description = "Above this many workers the coordinator invokes sub-coordinators that each invoke up to this many (QUIVER_TREE_THRESHOLD)."
  type        = number
  default     = 64

  validation {
    condition     = var.tree_threshold >= 2
    error_message = "tree_threshold must be at least 2."
  }
}

variable "worker_retries" {
  description = "Attempts after the first for a failed or timed-out worker (QUIVER_WORKER_RETRIES)."
  type        = number
  default     = 2

  validation {
    condition     = var.worker_retries >= 0 && var.worker_retries <= 10
    error_message = "worker_retries must be between 0 and 10."
  }
}

# Function URL

variable "function_url_auth_type" {
  description = "Auth of the coordinator's function URL: AWS_IAM (callers sign with SigV4 and need lambda:InvokeFunctionUrl and lambda:InvokeFunction, see the client_policy_json output) or NONE, which makes it public: anyone who knows the URL can run queries with the functions' S3 access."
  type        = string
  default     = "AWS_IAM"

  validation {
    condition     = contains(["AWS_IAM", "NONE"], var.function_url_auth_type)
    error_message = "function_url_auth_type must be AWS_IAM or NONE."
  }
}

variable "cors_allow_origins" {
  description = "Origins whose pages may call the function URL (the web page's origin, e.g. https://quiver.example.com). [\"*\"] allows any page, which is only wise with AWS_IAM auth."
  type        = list(string)
  # The web page's development server.
  default = ["http://localhost:5173"]

  validation {
    condition     = alltrue([for origin in var.cors_allow_origins : origin == "*" || can(regex("^https?://[^/*]+$", origin))])
    error_message = "Each origin must be scheme://host[:port] without a path (or \"*\")."
  }
}

variable "cors_max_age_seconds" {
  description = "How long browsers may cache the answer to a CORS preflight."
  type        = number
  default     = 3600

  validation {
    condition     = var.cors_max_age_seconds >= 0 && var.cors_max_age_seconds <= 86400
    error_message = "cors_max_age_seconds must be between 0 and 86400."
  }
}

# Logs

variable "log_retention_days" {
  description = "Days CloudWatch keeps the functions' logs."
  type        = number
  default     = 30

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be one of CloudWatch's retention periods (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)."
  }
}

# Scheduled jobs

variable "scheduled_jobs" {
  description = "Queries EventBridge runs through the coordinator on a schedule, e.g. a nightly COPY (...) TO 's3://...' PARTITIONED BY (...). Each: name (unique), schedule (cron(...) or rate(...), in UTC), sql."
  type = list(object({
    name     = string
    schedule = string
    sql      = string
  }))
  default = []

  validation {
    condition     = alltrue([for job in var.scheduled_jobs : can(regex("^[A-Za-z0-9_-]{1,32}$", job.name))])
    error_message = "Each job name must be 1-32 characters of A-Z, a-z, 0-9, _ and -."
  }

  validation {
    condition     = length(distinct([for job in var.scheduled_jobs : job.name])) == length(var.scheduled_jobs)
    error_message = "Job names must be unique."
  }

  validation {
    condition     = alltrue([for job in var.scheduled_jobs : can(regex("^(cron|rate)\\(.+\\)$", job.schedule))])
    error_message = "Each schedule must be cron(...) or rate(...)."
  }

  validation {
    condition     = alltrue([for job in var.scheduled_jobs : length(trimspace(job.sql)) > 0])
    error_message = "Each job needs its sql."
  }
}

variable "job_retries" {
  description = "Retries of a failed job run: EventBridge's delivery retries, and Lambda's retries when the query itself fails. Then the event goes to the dead-letter queue."
  type        = number
  default     = 2

  validation {
    condition     = var.job_retries >= 0 && var.job_retries <= 2
    error_message = "job_retries must be between 0 and 2 (Lambda's limit for asynchronous invocations)."
  }
}

variable "job_max_event_age_seconds" {
  description = "How long a job run may wait for delivery and retries before it goes to the dead-letter queue."
  type        = number
  default     = 3600

  validation {
    condition     = var.job_max_event_age_seconds >= 60 && var.job_max_event_age_seconds <= 21600
    error_message = "job_max_event_age_seconds must be between 60 and 21600."
  }
}

variable "alarm_actions" {
  description = "ARNs (e.g. SNS topics) notified when a failed job run reaches the dead-letter queue. Empty: the alarm still shows in CloudWatch."
  type        = list(string)
  default     = []
}
