# Throng: `make run` starts a server on 127.0.0.1:5222 for domain localhost;
# `make test` runs the whole test suite. Both install what is missing (apt).
REBAR ?= rebar3
REL := _build/default/rel/throng

.PHONY: all deps compile release run start stop test unit ct e2e check dialyzer xref \
        docs clean distclean

all: compile

deps:
	@scripts/deps.sh

compile: deps
	$(REBAR) compile

release: compile
	@scripts/syslibs.sh
	$(REBAR) release

run: release
	$(REL)/bin/throng foreground

start: release
	$(REL)/bin/throng start

stop:
	$(REL)/bin/throng stop

test: deps
	@scripts/test.sh

unit: compile
	$(REBAR) eunit

ct: compile
	$(REBAR) ct

check: dialyzer xref

dialyzer: compile
	$(REBAR) dialyzer

xref: compile
	$(REBAR) xref

docs:
	scripts/gen_config_doc.escript > docs/configuration.md

clean:
	$(REBAR) clean

distclean:
	rm -rf _build
