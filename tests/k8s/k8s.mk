# k8s tier: see tests/tests.mk. deploy/ checked offline, as no cluster runs here: every
# kustomization rendered (kubectl kustomize) and every object validated against the real
# Kubernetes schemas with unknown fields refused (validate.mjs, npm packages pinned in
# package-lock.json, installed by make test-deps) and agent-sandbox's objects against its vendored CRD
# schemas (crd.mjs, crds/), the project's invariants (invariants.py), the admission policy run by
# a CEL evaluator on the real pods and unsafe variants (admission.mjs), the pods agent-sandbox's
# controller makes (agent_sandbox.py), the NetworkPolicy truth table (netpol.py, tested on its
# own), bkctl kube's output; a server-side dry run only when KUBECONFIG reaches a cluster (SKIP
# otherwise). Needs kubectl, node and python3-yaml; a test that cannot run here says SKIP and why.

test-k8s: all
	cd tests/k8s && BOXKITE_BUILD=$(CURDIR)/$(B) $(TEST_RUN) --tier k8s --dir .
