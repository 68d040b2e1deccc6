# syntax=docker/dockerfile:1
# MemoryOS Streams: one image for every role.
#   docker run IMAGE serve    a stateless response-service replica (the default)
#   docker run IMAGE worker   a pipeline worker (needs MEMORYOS_BROKER_URL)
#   docker run IMAGE up       the embedded stack (broker, worker and service in one process)

ARG PYTHON_IMAGE=python:3.11-slim

# --- build: a virtualenv with torch (CPU) and the project ---
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

# torch first, from the CPU index: left to the resolver, sentence-transformers would pull a
# multi-GB CUDA build. Its own layer, so a source change does not re-download it.
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0

WORKDIR /src
COPY pyproject.toml README.md ./
COPY streams ./streams
COPY agents ./agents
COPY schemas ./schemas
COPY memory ./memory
COPY service ./service
COPY adapters ./adapters
COPY evaluation ./evaluation
COPY clients/python ./clients/python
RUN pip install ./clients/python && pip install . && pip check
# MiniLM's ONNX graphs, exported (and checked against torch) once here instead of at each
# container's first embedding: fp32 and int8 (a new store's default, MEMORYOS_MINILM_PRECISION
# auto), so that neither needs a write at run time (the folder is root's; the containers run
# as user 10001).
RUN MEMORYOS_MINILM_PRECISION=int8 MEMORYOS_MODEL_CACHE_DIR=/opt/models python -m adapters.embedders.minilm_models

# --- runtime: the virtualenv on a clean slim image, as a non-root user ---
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="memoryos-streams" \
      org.opencontainers.image.description="MemoryOS long-term memory as a Kafka/Faust pipeline" \
      org.opencontainers.image.licenses="Apache-2.0"

RUN groupadd --system --gid 10001 memoryos \
    && useradd --system --uid 10001 --gid memoryos --create-home --home-dir /home/memoryos \
       memoryos \
    && mkdir -p /data \
    && chown memoryos:memoryos /data

COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/models /opt/models

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    MEMORYOS_HOST=0.0.0.0 \
    MEMORYOS_PORT=8080 \
    MEMORYOS_DATA_DIR=/data \
    MEMORYOS_MODEL_CACHE_DIR=/opt/models

USER 10001:10001
WORKDIR /data
EXPOSE 8080

# No curl in slim images: the standard library does the probe. Start period covers the
# MiniLM load and the first consumer-group join.
HEALTHCHECK --interval=15s --timeout=5s --start-period=90s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('MEMORYOS_PORT', '8080') + '/healthz', timeout=4)"]

ENTRYPOINT ["memoryos"]
CMD ["serve"]
