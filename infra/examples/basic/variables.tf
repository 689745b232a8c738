variable "region" {
  description = "AWS region of the functions; the data buckets are best in the same one."
  type        = string
  default     = "us-east-1"
}

variable "name" {
  description = "Prefix of the resource names."
  type        = string
  default     = "quiver"
}

variable "data_location" {
  description = "S3 folder the queries read, ending in / (e.g. s3://my-bucket/tpch/, holding lineitem/*.parquet for the job)."
  type        = string

  validation {
    condition     = startswith(var.data_location, "s3://") && endswith(var.data_location, "/")
    error_message = "data_location must be an S3 folder: s3://BUCKET/PREFIX/."
  }
}

variable "reports_location" {
  description = "S3 folder the nightly job writes to, ending in / (e.g. s3://my-bucket/reports/)."
  type        = string

  validation {
    condition     = startswith(var.reports_location, "s3://") && endswith(var.reports_location, "/")
    error_message = "reports_location must be an S3 folder: s3://BUCKET/PREFIX/."
  }
}

variable "web_origins" {
  description = "Origins of the web page that may call the function URL."
  type        = list(string)
  default     = ["http://localhost:5173"]
}
