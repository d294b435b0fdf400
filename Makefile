# triton-fleet: the commands a newcomer needs. `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
VENV ?= .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
ROLE ?=
SCENARIO ?= default

.PHONY: help venv docker images lint unit molecule molecule-all test lab lab-down lab-status clean

help: ## This list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(BIN)/ansible-playbook: requirements.txt
	@py=$$(tools/find-python) && echo "venv with $$py" && "$$py" -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	@touch $@

venv: $(BIN)/ansible-playbook ## Create .venv (Python >= 3.12) with the pinned toolchain

docker: ## Install and start Docker and the apt cache when missing (idempotent)
	tools/ensure-docker

images: docker ## Build the base image, Debian 12 (reused while its recipe is unchanged)
	tools/images base

# Code that runs on managed hosts: modules, their module_utils, Python files roles copy to hosts.
NODE_PY := library $(wildcard roles/*/library) module_utils $(wildcard roles/*/files)

lint: venv ## yamllint, ansible-lint (production profile), ruff, vermin (host code runs on Python 3.11+)
	yamllint -s .
	ansible-lint
	ruff check .
	vermin --no-tips --violations --eval-annotations --target=3.11- $(NODE_PY)

unit: venv ## pytest unit tests, then the node-side ones under the managed hosts' Python (3.11)
	tools/run-unit
	tools/run-node-tests

molecule: venv images ## One role's Molecule test: make molecule ROLE=host_baseline [SCENARIO=default]
	@test -n "$(ROLE)" || { echo "Name the role: make molecule ROLE=<role> (roles: $$(ls roles | tr '\n' ' '))"; exit 2; }
	@test -d roles/$(ROLE)/molecule/$(SCENARIO) || { echo "roles/$(ROLE)/molecule/$(SCENARIO) does not exist"; exit 2; }
	cd roles/$(ROLE) && molecule test -s $(SCENARIO)

molecule-all: venv images ## Every Molecule scenario (role scenarios, then whole-fleet ones)
	tools/run-molecule-all

test: lint unit molecule-all ## Everything CI runs: lint + unit + every Molecule scenario

lab: venv images ## Bring up the lab fleet, converge site.yml on it and stream a first token
	tools/build-lab-image
	tools/lab up
	tools/lab converge

lab-status: venv ## Show the lab containers and how to reach them
	tools/lab status

lab-down: venv ## Remove the lab containers, network and volumes (nothing else)
	tools/lab down

clean: ## Remove caches (not the venv, not images)
	rm -rf .cache/facts .pytest_cache .ruff_cache
