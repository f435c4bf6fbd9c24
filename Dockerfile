# syntax=docker/dockerfile:1
# The worker image used by docker-compose.yml: ctxbudget with the `kafka` extra only (no
# development broker, no test tools), every dependency pinned by constraints.txt, running as
# a non-root user. One image, one stage per container (its command).
#
# The base image is pinned to a patch release; bump PYTHON_IMAGE deliberately (and add its
# digest, `python:3.11.14-slim-bookworm@sha256:...`, where a registry can be asked for it).
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
# The compiled hot path (native/) is built with this toolchain (the same Debian release);
# `--build-arg WITH_NATIVE=false` leaves it out: the packs are the same, only slower.
ARG RUST_IMAGE=rust:1.95-slim-bookworm

# ---- native: native/ as one abi3 wheel (CPython >= 3.11), built by maturin from its lock file.
FROM ${RUST_IMAGE} AS native
ARG WITH_NATIVE=true
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY native ./native
RUN mkdir -p /wheels && if [ "$WITH_NATIVE" = "true" ]; then \
  apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/maturin && /opt/maturin/bin/pip install maturin==1.16.0 \
 && /opt/maturin/bin/maturin build --release --locked -m native/Cargo.toml -o /wheels; fi

# ---- build: dependencies first (cached until pyproject.toml or constraints.txt change),
# ---- then the code, as a wheel that carries the policies and topic specs.
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY pyproject.toml constraints.txt ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['kafka']))" > requirements.txt \
 && pip install -c constraints.txt -r requirements.txt
# The audit sink (`ctxbudget audit-sink`, docker-compose.yml) also needs the `analytics` extra
# (DuckDB): build its image with `--build-arg WITH_ANALYTICS=true`; the workers' image has none.
ARG WITH_ANALYTICS=false
RUN if [ "$WITH_ANALYTICS" = "true" ]; then \
  python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['optional-dependencies']['analytics']))" > analytics.txt \
 && pip install -c constraints.txt -r analytics.txt; fi
COPY README.md ./
COPY ctxbudget ./ctxbudget
COPY policies ./policies
COPY topics ./topics
COPY examples/batches.jsonl examples/use_from_python.py ./examples/
COPY --from=native /wheels /native-wheels
RUN PIP_CONSTRAINT=/src/constraints.txt pip wheel --no-deps -w /wheels . \
 && pip install --no-deps /wheels/ctxbudget-*.whl \
 && if ls /native-wheels/*.whl >/dev/null 2>&1; then pip install --no-deps /native-wheels/*.whl; fi \
 && pip check

# ---- runtime: the interpreter, the venv, and the editable copies of the policies and specs.
FROM ${PYTHON_IMAGE} AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
# The shipped policies and topic specs (also inside the package); mount your own over them.
COPY policies ./policies
COPY topics ./topics
# The container entry points (`python -m workers STAGE...`); the code is in the wheel.
COPY workers ./workers
ENV CTXBUDGET_POLICIES=/app/policies
# /data: where the audit sink keeps its DuckDB file (a volume; owned by the runtime user).
RUN install -d -o 1000 -g 1000 /data
USER 1000:1000
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-m", "ctxbudget.kafka.healthcheck"]
ENTRYPOINT ["ctxbudget"]
CMD ["worker", "all"]
