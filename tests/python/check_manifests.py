"""Checks deploy/kubernetes against Kubernetes' API schemas and the agentprocess binary.

Usage: check_manifests.py BINARY

- every resource file the kustomization lists validates, strictly (no unknown field), against
  the API of the oldest Kubernetes version we support;
- every file the kustomization names exists, and every agentprocess container uses the image
  name the kustomization rewrites;
- every agentprocess container's arguments parse: the binary is run with them and `--help`
  appended, so an unknown flag or a malformed value fails as it would in the pod.

Prints one line per problem and exits 1 when there is any.
"""

import os
import re
import subprocess
import sys

import kubernetes_validate
import yaml

KUBERNETES_VERSION = "1.31.0"
DEPLOY = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "kubernetes")


def main(binary):
    problems = []
    with open(os.path.join(DEPLOY, "kustomization.yaml")) as f:
        kustomization = yaml.safe_load(f)
    image = kustomization["images"][0]["name"]
    for generator in kustomization.get("configMapGenerator", []):
        for name in generator.get("files", []):
            if not os.path.isfile(os.path.join(DEPLOY, name)):
                problems.append(f"configMapGenerator names {name}, which does not exist")
    checked_containers = 0
    for resource in kustomization["resources"]:
        path = os.path.join(DEPLOY, resource)
        if not os.path.isfile(path):
            problems.append(f"kustomization lists {resource}, which does not exist")
            continue
        with open(path) as f:
            documents = [d for d in yaml.safe_load_all(f) if d]
        for document in documents:
            name = f"{resource}: {document.get('kind')}/{document.get('metadata', {}).get('name')}"
            try:
                kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
            except kubernetes_validate.ValidationError as error:
                problems.append(f"{name}: {error.message} at {'.'.join(map(str, error.path))}")
            template = document.get("spec", {}).get("template", {}).get("spec", {})
            for container in template.get("containers", []):
                if container["image"] == image or container["image"].startswith("agentprocess"):
                    checked_containers += 1
                    if container["image"] != image:
                        problems.append(f"{name}: image {container['image']} is not {image}")
                    problems.extend(check_arguments(binary, name, container))
    if checked_containers == 0:
        problems.append("no agentprocess container found in the manifests")
    for problem in problems:
        print(problem)
    print(f"checked {checked_containers} agentprocess containers")
    return 1 if problems else 0


def check_arguments(binary, name, container):
    # $(VAR) is expanded by Kubernetes from the container's environment; stand in a value.
    arguments = [re.sub(r"\$\((\w+)\)", "10.0.0.1", a) for a in container.get("args", [])]
    answer = subprocess.run([binary, *arguments, "--help"], capture_output=True, text=True)
    if answer.returncode != 0:
        return [f"{name}: `agentprocess {' '.join(arguments)}` does not parse: {answer.stderr.strip()}"]
    return []


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
