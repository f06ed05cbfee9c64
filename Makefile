# brigade's everyday commands, for people and CI (docs/ci.md).
#
# make turns any failing recipe into its own exit 2, which to brigade means "could not
# start". So `make eval` and `make report` write brigade's own exit code to $(STATUS)
# before they exit with it: 0 clean, 1 a seat failed, 3 a measurement failure, 2 could not
# start. A CI job reads it there (or reads report/junit.xml) to tell 1 from 3.

VENV     ?= .venv
DOIT     ?= $(VENV)/bin/doit
BRIGADE  ?= $(VENV)/bin/brigade
MANIFEST ?= manifests/demo.yaml
OUT      ?= .brigade/evals/demo
VARS     ?=
STATUS   ?= .brigade/make-status

.PHONY: eval report test

# bring every cell of $(MANIFEST) up to date (VARS: more doit variables, e.g. cases=greet)
eval:
	@mkdir -p $(dir $(STATUS))
	@$(DOIT) manifest=$(MANIFEST) out=$(OUT) $(VARS); code=$$?; echo $$code > $(STATUS); exit $$code

# write $(OUT)/report/junit.xml and index.html again
report:
	@mkdir -p $(dir $(STATUS))
	@$(BRIGADE) report $(OUT); code=$$?; echo $$code > $(STATUS); exit $$code

# README.md's test command (the one .ci/run runs)
test:
	python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pytest
