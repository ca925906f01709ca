# streamscore: the two commands a newcomer needs are `make demo` and `make test`.
# Each creates .venv/ on first use (torch is large: minutes the first time on a
# machine, seconds afterwards) and starts local Kafka + Redis when needed.

# The interpreter .venv/ is built on: PYTHON from the environment (PYTHON=python3.12 make venv), else python3.
INTERPRETER := $(if $(filter environment,$(origin PYTHON)),$(PYTHON),python3)
PYTHON := .venv/bin/python
WITH_SERVICES := deploy/local/with-services.sh

.PHONY: help venv up up-secure down status up-cluster down-cluster demo fleet docs test test-unit test-cluster conformance lint deploy-check bench bench-cluster bench-cpu bench-quix chaos chaos-scaling chaos-scaling-cluster clean

CHAOS_SIZE ?= full
SCALING_ARGS ?= --runs 5 --size small

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-21s %s\n", $$1, $$2}'

venv:  ## create .venv/ (dependencies cached per machine; PYTHON=... picks the interpreter)
	@PYTHON=$(INTERPRETER) bash deploy/venv.sh

up: venv  ## create .venv/, start local Kafka + Redis + the schema registry and print their addresses
	@deploy/local/services.sh up

up-secure:  ## start local Kafka + Redis and print the SASL_SSL/TLS export lines
	@deploy/local/services.sh up --secure

down:  ## stop local Kafka + Redis
	@deploy/local/services.sh down

status:  ## are local Kafka + Redis running?
	@deploy/local/services.sh status

up-cluster:  ## start a local three-broker Kafka cluster (KRaft, RF 3) and print its address
	@deploy/local/cluster.sh up

down-cluster:  ## stop the local three-broker Kafka cluster
	@deploy/local/cluster.sh down

demo: venv  ## the whole pipeline: worker, 20,000 requests, every reply, a summary (~30 s)
	@$(WITH_SERVICES) $(PYTHON) -m producer demo

fleet: venv  ## several models in one worker: a canary, a shadow, a deploy without a restart, a summary (~30 s)
	@$(WITH_SERVICES) $(PYTHON) -m examples.fleet.run $(FLEET_ARGS)

docs: venv  ## build the documentation site into site/ (MkDocs, --strict: a broken link or anchor fails it; seconds)
	@NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict

test: venv lint deploy-check docs  ## lint, the docs site, then the whole test suite, integration tests on real Kafka + Redis (~45 min)
	@$(WITH_SERVICES) $(PYTHON) -m pytest tests --ignore=tests/cluster --durations=30

test-unit: venv  ## unit and component tests only (no services, ~4 min)
	@$(PYTHON) -m pytest tests/unit tests/component

# $(call on_cluster,COMMAND): runs COMMAND with the cluster's KAFKA_BOOTSTRAP_SERVERS; starts the cluster unless
# all three nodes run, and stops it afterwards only if it started it. Redis: REDIS_URL, else the local single
# Redis (make up).
on_cluster = was=$$(deploy/local/cluster.sh status | grep -c 'running (pid' || true); \
	eval "$$(deploy/local/cluster.sh up)" || exit 1; rc=0; \
	REDIS_URL=$${REDIS_URL:-redis://127.0.0.1:$${REDIS_PORT:-16379}/0} $(1) || rc=$$?; \
	[ "$$was" = 3 ] || deploy/local/cluster.sh down; exit $$rc

test-cluster: venv  ## broker faults on the three-broker cluster, both clients and modes (tests/cluster, ~15 min; needs Redis: make up)
	@$(call on_cluster,RUN_CLUSTER_TESTS=1 $(PYTHON) -m pytest tests/cluster -s $(PYTEST_ARGS))

# A small size of the same suite runs in `make test` (tests/conformance).
conformance: venv  ## clients we did not write (Java, librdkafka), every codec, on Kafka 4.1, 4.4 and 3.9 -> docs/interop/ (~15 min)
	@$(WITH_SERVICES) $(PYTHON) -m tests.conformance.matrix --size full $(CONFORMANCE_ARGS)

bench: venv  ## benchmarks: ceilings, naive baseline, streamscore grid -> bench/results/ (~8-10 min); CLUSTER=1: on the three-broker cluster
ifeq ($(CLUSTER),1)
	@eval "$$(deploy/local/services.sh up)" && eval "$$(deploy/local/cluster.sh up)" && \
		$(PYTHON) -m bench --replication 3 $(BENCH_ARGS)
else
	@$(WITH_SERVICES) $(PYTHON) -m bench $(BENCH_ARGS)
endif

bench-cluster: venv  ## one broker against the three-broker cluster, side by side -> bench/results/cluster/ (~12 min; leaves both running)
	@eval "$$(deploy/local/services.sh up)" && \
		CLUSTER_BOOTSTRAP_SERVERS="$$(deploy/local/cluster.sh up | sed -n 's/^export KAFKA_BOOTSTRAP_SERVERS=//p')" \
		$(PYTHON) -m bench.cluster $(BENCH_ARGS)

bench-cpu: venv  ## CPU a reply: a bare librdkafka loop, the same job by hand, streamscore -> bench/results/cpu-per-reply/ (~2 min)
	@$(WITH_SERVICES) $(PYTHON) -m bench.cpu_per_reply $(BENCH_ARGS)

bench-quix: venv  ## bench-cpu plus the same job as a Quix Streams app, in its own .venv-quix/ -> bench/results/cpu-per-reply/ (~5 min)
	@bash bench/quix_venv.sh
	@$(WITH_SERVICES) $(PYTHON) -m bench.cpu_per_reply --quix $(BENCH_ARGS)

chaos: venv  ## chaos suite on local Kafka + Redis: a table per scenario and client (CHAOS_SIZE=small|full, ~43 min full for both clients)
	@$(WITH_SERVICES) $(PYTHON) -m tests.chaos --size $(CHAOS_SIZE)

chaos-scaling: venv  ## scaling 1 -> 4 -> 8 -> 2 -> 1 under load, every client, group protocol and delivery, gaps by step (~50 min; SCALING_ARGS)
	@$(WITH_SERVICES) $(PYTHON) -m tests.chaos.scaling $(SCALING_ARGS)

chaos-scaling-cluster: venv  ## the same on the three-broker cluster, topics replicated 3 (~60 min; needs Redis: make up)
	@$(call on_cluster,$(PYTHON) -m tests.chaos.scaling --replication 3 $(SCALING_ARGS))

lint: venv  ## ruff (rules in pyproject.toml) and mypy --strict on worker/, producer/ and bench/ (seconds)
	@$(PYTHON) -m ruff check .
	@$(PYTHON) -m mypy

deploy-check: venv  ## validate deploy/ offline: Dockerfile, compose, Kubernetes + KEDA, dashboard queries (seconds)
	@$(PYTHON) deploy/check.py

clean:  ## remove .venv/ and local service state (not the cached dependencies)
	@deploy/local/services.sh reset
	rm -rf .venv
