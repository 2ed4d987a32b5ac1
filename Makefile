# Thin aliases for scripts/dev.sh (which needs no make).
.PHONY: demo test lint ci
demo:
	scripts/dev.sh demo
test:
	scripts/dev.sh test
lint:
	scripts/dev.sh lint
ci:
	scripts/dev.sh ci
