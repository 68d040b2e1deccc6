"""The help texts of `memoryos`, written for its users: what each command does, with examples."""

from __future__ import annotations

# One line per command: the command list of `memoryos --help`, the first line of the command's
# own --help, and (a test checks) the Commands table of docs/usage.md.
HELP = {
    "up": "start broker, pipeline and HTTP API on this machine",
    "ingest": "load chat history from a JSONL file into memory",
    "inspect": "show what the memory holds about one user, and their recent pipeline history",
    "doctor": "check that the LLM, embedder, store and broker answer",
    "eval": "measure retrieval quality on a dataset",
    "eval locomo": "evidence recall on LoCoMo through the pipeline, beside BM25 and dense",
    "bench": "measure ingest throughput and retrieve/respond latency",
    "worker": "run only the pipeline workers (production; needs --broker)",
    "serve": "run only the HTTP API, stateless (production; needs --broker)",
    "mcp": "serve the memory to MCP clients over stdio or HTTP",
    "dlq": "list the records that failed, or send them back to be processed again",
    "events": "the stream of memory changes (memoryos.events)",
    "events tail": "print memory changes as they happen, one CloudEvent per line",
    "keys": "make, list and revoke tenants' API keys",
    "export": "write a tenant's memory (or one user's) to stdout as NDJSON",
    "import": "load a memory export into the running service",
}

KEYS_EPILOG = """\
examples:
  memoryos keys create --tenant acme --scopes read,write --name support-bot
  memoryos keys list --tenant acme
  memoryos keys revoke 3f9c2a1b7d4e6f80

create prints the key once, alone on the last line of stdout; only its hash is kept. With the
stack stopped the keys are written to its data folder; while it runs, through its HTTP API
with the first of MEMORYOS_API_KEYS.
"""

EXAMPLE_TURN = (
    '{"user_id": "alice", "turn_id": "t1", "query": "I moved to Lyon.", '
    '"response": "Nice!", "timestamp": "2024-03-01T09:00:00Z"}'
)

DESCRIPTION = """\
MemoryOS Streams: long-term memory for chat agents.

Start the memory, feed it conversations, see what it keeps:
  memoryos up                         start it all on this machine (broker, pipeline, HTTP API)
  memoryos up --demo                  the same, then load a sample conversation and show it
  memoryos ingest chats.jsonl --wait  load chat history from a file; wait until it is in memory
  memoryos inspect alice              show what the memory holds about a user
  memoryos doctor                     check that the LLM, embedder, store and broker answer
  memoryos dlq list                   see what failed and why; `dlq replay` sends it back
  memoryos eval locomo | bench        measure recall, throughput and latency

Settings come from MEMORYOS_* environment variables (see the README); flags override them.
Run `memoryos COMMAND --help` for a command's options and examples.
"""

INGEST_EPILOG = f"""\
Each line of FILE is one turn, a JSON object such as
{EXAMPLE_TURN}
Optional fields: "assistant_id", "channel", "meta" (any JSON object); a time without a zone
is UTC. The JSON schema is schemas/turn.schema.json. A turn id sent before is a no-op.

examples:
  memoryos ingest chats.jsonl                 send, then report sent/acknowledged/invalid
  memoryos ingest chats.jsonl --wait          ...and wait until memory holds every turn
  memoryos ingest chats.jsonl --quiet > log   plain lines, no bar

Progress goes to stderr (a bar on a terminal, plain lines otherwise). The summary goes to
stdout, one fact per line: "sent N turns ...", "acknowledged N of N turns by the stack" (by
the broker with --broker), "invalid N of N lines", with --wait "placed N of N turns ...".
With the embedded broker the turns go through the running stack's HTTP API (--url), which
journals them before it answers. The first invalid lines are
shown on stderr as FILE:LINE: reason. Exit status 0 when every line was sent, acknowledged
(and placed, with --wait); 1 otherwise; 2 when the file or the broker is missing.
"""

UP_EPILOG = """\
examples:
  memoryos up                               broker on :9092, HTTP on 127.0.0.1:8080
  memoryos up --demo                        ...and load and show a sample conversation
  memoryos up --broker kafka:9092           use an existing Kafka instead of the embedded one

Shows each start-up step (broker, model, worker, http) and the time it took, then the URLs
to try. Ctrl-C stops, after finishing the work in flight.
"""

EVAL_EPILOG = """\
example:
  memoryos eval locomo locomo10.json --out results/locomo --samples conv-26

Writes OUT/retrieval.jsonl, OUT/summary.md and OUT/summary.json.
"""

BENCH_EPILOG = """\
example:
  memoryos bench --quick --out results/bench
  memoryos bench --soak 35 --soak-rate 7 --out results/soak

Writes OUT/bench.json, bench.md, samples.json and two PNG plots; prints the tables.
With --soak: OUT/bench.json (summary and series) and soak.png.
"""
