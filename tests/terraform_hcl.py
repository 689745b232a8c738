"""Terraform modules as python-hcl2 reads them, and their expressions evaluated by
`terraform console`: the reader and renderer behind tests/test_infra.py, kept apart from its
checks. Needs python-hcl2 8.x (its values keep HCL's own text: "\\"a\\"" for a string, "${x}"
for an expression), which test_infra.py checks before importing this.

Module reads a directory's blocks; document_hcl renders an aws_iam_policy_document (static and
dynamic statements, source documents) as one HCL expression; evaluate runs an expression
against the module's variables and locals, with resource attributes (known only after apply)
standing in as "<aws_x.y.arn>".
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import hcl2


def find_terraform():
    """The terraform binary on PATH or in ~/go/bin (scripts/setup-infra.sh), else None."""
    for candidate in (shutil.which("terraform"), os.path.expanduser("~/go/bin/terraform")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


TERRAFORM = find_terraform()


# Reading HCL

def unquote(text):
    """'"abc"' -> 'abc' (a string literal); anything else is returned as is."""
    if isinstance(text, str) and len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        try:
            return json.loads(text)
        except ValueError:  # a heredoc, which python-hcl2 wraps in quotes as it stands
            return text[1:-1]
    return text


def to_python(value):
    """python-hcl2's tree without its markers, with string literals unquoted."""
    if isinstance(value, dict):
        return {unquote(k): to_python(v) for k, v in value.items() if not k.startswith("__")}
    if isinstance(value, list):
        return [to_python(v) for v in value]
    return unquote(value)


class Module:
    """The blocks of one directory of .tf files, keyed as Terraform names them."""

    def __init__(self, directory):
        self.dir = Path(directory)
        self.resources, self.data, self.variables, self.outputs = {}, {}, {}, {}
        self.modules, self.raw = {}, {}
        for path in sorted(self.dir.glob("*.tf")):
            self.raw[path.name] = path.read_text()
            tree = hcl2.loads(self.raw[path.name])
            for kind, target in (("resource", self.resources), ("data", self.data)):
                for block in tree.get(kind, []):
                    for rtype, named in block.items():
                        for name, body in named.items():
                            if isinstance(body, dict):
                                target[(unquote(rtype), unquote(name))] = body
            for kind, target in (("variable", self.variables), ("output", self.outputs),
                                 ("module", self.modules)):
                for block in tree.get(kind, []):
                    for name, body in block.items():
                        target[unquote(name)] = body

    def resource(self, rtype, name):
        assert (rtype, name) in self.resources, f"no resource {rtype}.{name} in {self.dir}"
        return to_python(self.resources[(rtype, name)])

    def of_type(self, rtype):
        return {n: to_python(b) for (t, n), b in self.resources.items() if t == rtype}

    def variable(self, name):
        assert name in self.variables, f"no variable {name}"
        return to_python(self.variables[name])

    def policy_documents(self):
        return {n: b for (t, n), b in self.data.items() if t == "aws_iam_policy_document"}


# Rendering policy documents with `terraform console`

def to_hcl(raw):
    """HCL text of a python-hcl2 value: strings are already HCL (quoted or ${expr})."""
    if isinstance(raw, list):
        return "[" + ", ".join(to_hcl(v) for v in raw) + "]"
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (int, float)):
        return json.dumps(raw)
    if raw.startswith("${") and raw.endswith("}") and not raw.startswith('"'):
        return "(" + raw[2:-1] + ")"
    return raw


def _bind(text, iterator, key, value):
    """Replace a dynamic block's iterator (statement.key, statement.value) in HCL text."""
    text = re.sub(rf"\b{iterator}\.key\b", key, text)
    return re.sub(rf"\b{iterator}\.value\b", value, text)


def blocks(body, name):
    """Static blocks `name {}` and dynamic ones `dynamic "name" {}` (with their iterator)."""
    static = body.get(name, [])
    dynamic = []
    for item in body.get("dynamic", []):
        for label, spec in item.items():
            if unquote(label) == name:
                iterator = unquote(spec.get("iterator", name))
                dynamic.append((to_hcl(spec["for_each"]), iterator, spec["content"][0]))
    return static, dynamic


_STATEMENT_FIELDS = ("effect", "actions", "not_actions", "resources", "not_resources")


def _statement_hcl(stmt, bind=lambda t: t):
    """One statement as an HCL object expression of a fixed shape (so tuples unify)."""
    fields = [f"{f} = {bind(to_hcl(stmt[f])) if f in stmt else 'null'}"
              for f in _STATEMENT_FIELDS]
    principals = [f'{{type = {bind(to_hcl(p["type"]))}, '
                  f'identifiers = {bind(to_hcl(p["identifiers"]))}}}'
                  for p in stmt.get("principals", [])]
    fields.append(f"principals = [{', '.join(principals)}]")
    static, dynamic = blocks(stmt, "condition")
    parts = ["[" + ", ".join(
        f'{{test = {bind(to_hcl(c["test"]))}, variable = {bind(to_hcl(c["variable"]))}, '
        f'values = {bind(to_hcl(c["values"]))}}}' for c in static) + "]"]
    for for_each, it, c in dynamic:
        inner = lambda t, it=it: _bind(t, it, "ck", "cv")
        parts.append(f"[for ck, cv in {bind(for_each)} : "
                     f'{{test = {bind(inner(to_hcl(c["test"])))}, '
                     f'variable = {bind(inner(to_hcl(c["variable"])))}, '
                     f'values = {bind(inner(to_hcl(c["values"])))}}}]')
    fields.append(f"conditions = concat({', '.join(parts)})")
    return "{" + ", ".join(fields) + "}"


def document_hcl(module, name, seen=()):
    """An HCL expression for the statements of data.aws_iam_policy_document.NAME,
    including those of its source_policy_documents."""
    assert name not in seen, f"policy documents include each other: {seen}"
    body = module.policy_documents()[name]
    assert "override_policy_documents" not in body and "override_json" not in body, \
        f"{name}: override documents hide what a policy grants; use statements"
    parts = []
    for source in body.get("source_policy_documents", []):
        match = re.fullmatch(r"\$\{data\.aws_iam_policy_document\.(\w+)(\[0\])?\.json\}", source)
        assert match, f"{name}: source_policy_documents must name documents of this module: {source}"
        parts.append(document_hcl(module, match.group(1), seen + (name,)))
    static, dynamic = blocks(body, "statement")
    parts.append("[" + ", ".join(_statement_hcl(s) for s in static) + "]")
    for for_each, it, content in dynamic:
        parts.append(f"[for sk, sv in {for_each} : "
                     f"{_statement_hcl(content, lambda t, it=it: _bind(t, it, 'sk', 'sv'))}]")
    return f"concat({', '.join(parts)})"


# Resource attributes are unknown until apply: each becomes the string "<type.name.attr>".
_PARTITION = re.compile(r"\bdata\.aws_partition\.current\.partition\b")
_DATA_REF = re.compile(r"(?<![\w.])data\.(aws_\w+)\.(\w+)(\[[^\]]*\])?\.(\w+)")
_RESOURCE_REF = re.compile(r"(?<![\w.\"<])(aws_\w+)\.(\w+)(\[[^\]]*\])?\.(\w+)")


def _placeholders(text):
    text = _PARTITION.sub('"aws"', text)
    text = _DATA_REF.sub(lambda m: '"<data.' + m.group(0)[5:] + '>"', text)
    return _RESOURCE_REF.sub(lambda m: '"<' + m.group(0) + '>"', text)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def evaluate(module, expression, variables):
    """Evaluate an HCL expression in a scratch copy of the module's variables and locals
    (resource references replaced by placeholders) with `terraform console`."""
    assert TERRAFORM, "terraform not found"
    locals_blocks = []
    for text in module.raw.values():
        locals_blocks += re.findall(r"^locals \{\n.*?^\}\n", text, flags=re.M | re.S)
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        shutil.copy(module.dir / "variables.tf", scratch / "variables.tf")
        (scratch / "locals.tf").write_text(_placeholders("\n".join(locals_blocks)))
        (scratch / "terraform.tfvars.json").write_text(json.dumps(variables))
        (scratch / "empty.tfrc").write_text("")
        env = dict(os.environ, CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1",
                   TF_CLI_CONFIG_FILE=str(scratch / "empty.tfrc"))
        run = subprocess.run([TERRAFORM, "console"], cwd=scratch, env=env, text=True,
                             input=f"jsonencode({_placeholders(expression)})\n",
                             capture_output=True, timeout=120)
    output = _ANSI.sub("", run.stdout + run.stderr)
    if run.returncode != 0 or "Error:" in output:
        raise ValueError(output)
    line = [l for l in run.stdout.splitlines() if l.strip()][-1]
    return json.loads(json.loads(line))
