"""How fast hitkit's webhook route answers Prolific, and that a flood of duplicates adds one row per event.

Prolific retries a delivery that is not answered 2xx in time, so the route must answer fast whatever the
queue holds: it checks the signature over the raw body, writes one row per new ``X-Event-ID`` and returns
(the work is the scheduler's). This runs the real worker-facing server (the embedded waitress server on
SQLite, the default), a study with a signing secret, and posts ``--events`` signed deliveries from
``--clients`` threads at once, each event ``--copies`` times in a shuffled order, plus as many forged ones.
Prints, last::

    RESULT p50_ms=… p99_ms=… per_s=… rows_per_event=… forged_accepted=…

The target: p99 ≤ 200 ms on the embedded default, exactly 1.0 row per event, 0 forged accepted.

Usage: ``python benchmarks/webhooks.py [--events 300] [--copies 2] [--clients 8] [--seed 5]``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--copies", type=int, default=2, help="deliveries of each event (Prolific's retries)")
    parser.add_argument("--clients", type=int, default=8, help="deliveries in flight at once")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)

    import yaml
    from sqlalchemy import func, select

    from hitkit.db.hook_models import HookEvent, HookSubscription
    from hitkit.db.migrate import upgrade
    from hitkit.db.session import session_scope
    from hitkit.providers.prolific.webhooks import signature
    from hitkit.study.loading import load_study
    from hitkit.study.stored import create_study, resolve_secret
    from server.embedded import WebServer

    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="hitkit-webhooks-") as tmp:
        folder = Path(tmp)
        url = f"sqlite:///{folder / 'hitkit.db'}"
        upgrade(url)
        data = yaml.safe_load((ROOT / "examples" / "pairwise.yaml").read_text())
        data["pairwise"]["responses"] = str(ROOT / "examples" / "data" / "ab_responses.jsonl")
        data.update(
            out=str(folder / "runs"),
            database=url,
            provider={"kind": "prolific", "currency": "GBP", "prolific": {"estimated_minutes": 2}},
        )
        (folder / "study.yaml").write_text(yaml.safe_dump(data))
        config = load_study(folder / "study.yaml")
        secret = "bench-" + "%032x" % rng.getrandbits(128)
        with session_scope(url) as s:
            ctx = create_study(s, config, folder / "study.yaml", resolve_secret(url))
            s.add(
                HookSubscription(
                    study_id=ctx.study_id,
                    provider="prolific",
                    event_type="submission.status.change",
                    remote_id="sub",
                    target_url="https://bench.example/hooks/prolific/ab-demo",
                    secret=secret,
                    status="confirmed",
                )
            )
        web = WebServer(url, "127.0.0.1", 0, args.clients * 2, resolve_secret(url)).start()
        target = f"{web.url}/hooks/prolific/{config.study}"
        deliveries = []
        for i in range(args.events):
            body = json.dumps(
                {
                    "resource_id": "%024x" % rng.getrandbits(96),
                    "event_type": "submission.status.change",
                    "participant_id": "%024x" % rng.getrandbits(96),
                    "status": "RETURNED",
                }
            ).encode()
            deliveries += [(f"evt-{i}", body, True)] * args.copies + [(f"forged-{i}", body, False)]
        rng.shuffle(deliveries)
        times: list[float] = []
        answers: list[tuple[bool, int]] = []
        lock = threading.Lock()
        todo = iter(deliveries)

        def client() -> None:
            http = requests.Session()
            while True:
                with lock:
                    item = next(todo, None)
                if item is None:
                    return
                event_id, body, genuine = item
                stamp = str(int(time.time()))
                sig = signature(secret if genuine else "not-the-secret", stamp, body)
                began = time.perf_counter()
                reply = http.post(
                    target,
                    data=body,
                    headers={
                        "Content-Type": "application/json",
                        "X-Event-ID": event_id,
                        "X-Timestamp": stamp,
                        "X-Prolific-Request-Timestamp": stamp,
                        "X-Prolific-Request-Signature": sig,
                    },
                )
                took = (time.perf_counter() - began) * 1000
                with lock:
                    times.append(took)
                    answers.append((genuine, reply.status_code))

        began = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - began
        web.stop()
        with session_scope(url) as s:
            rows = s.scalar(select(func.count()).select_from(HookEvent))
    times.sort()
    p50, p99 = statistics.median(times), times[min(len(times) - 1, int(0.99 * len(times)))]
    refused = sum(1 for genuine, status in answers if not genuine and status == 401)
    forged_accepted = sum(1 for genuine, status in answers if not genuine and status < 400)
    bad_genuine = sum(1 for genuine, status in answers if genuine and status != 200)
    print(
        f"{len(answers)} deliveries ({args.events} events × {args.copies} + {args.events} forged) from "
        f"{args.clients} clients in {wall:.1f} s; forged refused {refused}; genuine not 200: {bad_genuine}"
    )
    print(
        f"RESULT p50_ms={p50:.1f} p99_ms={p99:.1f} per_s={len(answers) / wall:.0f} "
        f"rows_per_event={rows / args.events:.3f} forged_accepted={forged_accepted}"
    )
    return 0 if forged_accepted == 0 and rows == args.events and bad_genuine == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
