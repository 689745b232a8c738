terraform {
  # 1.5: the oldest release CI installs (go install github.com/hashicorp/terraform@v1.5.7).
  required_version = ">= 1.5"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 6.29 added invoked_via_function_url to aws_lambda_permission: since October 2025 a
      # public (NONE) function URL also needs lambda:InvokeFunction, and that argument keeps
      # the grant to calls through the URL instead of opening the Invoke API to everyone.
      version = ">= 6.29"
    }
  }
}
