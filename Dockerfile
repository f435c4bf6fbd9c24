# The worker image used by docker-compose.yml: the ctxbudget package with the kafka extra,
# the shipped policies and topic specs. One image, one stage per container (its command).
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY ctxbudget ./ctxbudget
COPY workers ./workers
RUN pip install --no-cache-dir ".[kafka]"
COPY policies ./policies
COPY topics ./topics
ENV CTXBUDGET_POLICIES=/app/policies
USER 1000:1000
ENTRYPOINT ["ctxbudget"]
CMD ["worker", "all"]
