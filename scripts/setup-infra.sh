#!/usr/bin/env bash
# Installs what scripts/check-infra.sh needs; safe to run again (skips what is there).
#   checkov      pinned, in its own virtualenv ($QUIVER_INFRA_VENV, default
#                ~/.cache/quiver-infra/venv): it pins its own boto3 and friends, which
#                must not replace the project's.
#   python-hcl2  pinned, in the project's python3, for tests/test_infra.py.
#   terraform    on PATH, else ~/go/bin/terraform, else built with
#                `go install github.com/hashicorp/terraform@v1.5.7` (a few minutes).
# Source it to get TERRAFORM and CHECKOV set; running it only installs.

CHECKOV_VERSION=3.3.30
HCL2_VERSION=8.1.4
TERRAFORM_VERSION=v1.5.7
QUIVER_INFRA_VENV="${QUIVER_INFRA_VENV:-$HOME/.cache/quiver-infra/venv}"

export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"
# No calls home: Terraform's version check, checkov's update check and platform download.
export CHECKPOINT_DISABLE=1 CKV_SKIP_PACKAGE_UPDATE_CHECK=TRUE BC_SKIP_MAPPING=TRUE
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

quiver_setup_infra() {
  local say="echo setup-infra:"

  if "$QUIVER_INFRA_VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('checkov') != '$CHECKOV_VERSION')" 2>/dev/null; then
    $say "checkov $CHECKOV_VERSION present"
  else
    $say "installing checkov $CHECKOV_VERSION into $QUIVER_INFRA_VENV"
    python3 -m venv "$QUIVER_INFRA_VENV" || return 1
    "$QUIVER_INFRA_VENV/bin/python" -m pip install -q "checkov==$CHECKOV_VERSION" || return 1
  fi
  CHECKOV="$QUIVER_INFRA_VENV/bin/checkov"

  if python3 -c "import importlib.metadata as m, sys; sys.exit(m.version('python-hcl2') != '$HCL2_VERSION')" 2>/dev/null; then
    $say "python-hcl2 $HCL2_VERSION present"
  else
    $say "installing python-hcl2 $HCL2_VERSION"
    python3 -m pip install -q "python-hcl2==$HCL2_VERSION" || return 1
  fi

  TERRAFORM="$(command -v terraform || true)"
  if [ -z "$TERRAFORM" ]; then
    $say "building terraform $TERRAFORM_VERSION with go install"
    go install "github.com/hashicorp/terraform@$TERRAFORM_VERSION" || return 1
    local gobin
    gobin="$(go env GOBIN)"
    [ -n "$gobin" ] || gobin="$(go env GOPATH | cut -d: -f1)/bin"
    TERRAFORM="$gobin/terraform"
  fi
  $say "terraform at $TERRAFORM"
  export TERRAFORM CHECKOV
}

quiver_setup_infra
