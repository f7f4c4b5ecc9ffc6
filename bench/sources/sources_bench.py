#!/usr/bin/env python3
"""The sources benchmark (prints, never asserts): a session fed by its broker — Redis (Debian's redis-server),
Kafka (librdkafka's mock cluster, the aoi-kafka-mock helper; Debian 12 packages no Kafka broker) and MQTT
(Debian's mosquitto), each started here on loopback — measured side by side with the same records pushed over
HTTP, one system at a time, warmed up, repeated (medians). bench/sources/run.sh builds and runs this.

    sources_bench.py --aoi BIN --model GGUF --kafka-mock BIN [--threads N] [--samples N] [--backlog N]
                     [--recoveries N] [--brokers redis,kafka,mqtt] [--out FILE]

Measured, per broker and for HTTP pushes:
  latency    publish -> the session's `data_updated` event (SSE), one record at a time, --samples of them, each
             after the previous one was ingested (the time a lone record takes to reach the model's context)
  rate       --backlog records waiting (in the broker, or pushed in batches of 100 as fast as aoi takes them)
             -> all ingested: records per second, consumed against the ingestion rate of pushes
  recovery   kill -9 of aoi while a producer keeps publishing, restart -> the first new record ingested
             (--recoveries times; the restart's own time to /health shown beside it)
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import benchlib  # noqa: E402


def wait_until(what, fn, timeout=60.0, every=0.01):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(every)


# ---- aoi ----

class Aoi:
    def __init__(self, args, data_dir=None):
        self.port = benchlib.free_port()
        cmd = [args.aoi, "serve", "--model", args.model, "--host", "127.0.0.1", "--port", str(self.port),
               "--threads", str(args.threads)]
        cmd += ["--data-dir", data_dir] if data_dir else ["--memory-only"]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until("aoi /health", lambda: self.call("GET", "/health", quiet=True)[0] == 200, timeout=300)
        self.ready = time.monotonic()

    def call(self, method, path, body=None, quiet=False):
        try:
            return benchlib.json_call(self.port, method, path, body)
        except OSError:
            if quiet:
                return 0, None
            raise

    def session(self, sid):
        status, body = self.call("GET", f"/v1/sessions/{sid}")
        return body if status == 200 else None

    def create(self, body):
        status, out = self.call("POST", "/v1/sessions", body)
        if status != 201:
            raise RuntimeError(f"creating a session: {status} {out}")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Events:
    """The session's SSE stream: the time each data_updated event arrived, by version."""

    def __init__(self, aoi, sid):
        self.arrived = {}
        self.cv = threading.Condition()
        self.conn = http.client.HTTPConnection("127.0.0.1", aoi.port)
        self.conn.request("GET", f"/v1/sessions/{sid}/events")
        self.resp = self.conn.getresponse()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        event = None
        try:
            for raw in self.resp:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:") and event == "data_updated":
                    version = json.loads(line[5:])["version"]
                    with self.cv:
                        self.arrived[version] = time.monotonic()
                        self.cv.notify_all()
        except (OSError, ValueError):
            pass

    def wait(self, version, timeout=60.0):
        with self.cv:
            if not self.cv.wait_for(lambda: any(v >= version for v in self.arrived), timeout):
                raise RuntimeError(f"no data_updated for version {version}")
            return min(t for v, t in self.arrived.items() if v >= version)

    def close(self):
        self.conn.close()


# ---- brokers: each starts, makes a topic, gives its source URL and a publisher writing one record at a time ----

class Redis:
    name = "redis"

    def __init__(self, tmp):
        self.port = benchlib.free_port()
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", tmp,
                                      "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
        wait_until("redis", lambda: subprocess.run(["redis-cli", "-p", str(self.port), "PING"], capture_output=True,
                                                   text=True).stdout.strip() == "PONG")

    def url(self, topic):
        return f"redis://127.0.0.1:{self.port}/{topic}"

    def topic(self, topic):
        pass

    def publisher(self, topic):
        sock = socket.create_connection(("127.0.0.1", self.port))
        reader = sock.makefile("rb")

        def publish(lines):
            out = b""
            for line in lines:
                parts = [b"XADD", topic.encode(), b"*", b"m", line.encode()]
                out += b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
            sock.sendall(out)
            for _ in lines:
                reader.readline()
                reader.readline()
        publish.close = sock.close
        return publish

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Kafka:
    name = "kafka"

    def __init__(self, tmp, mock):
        self.proc = subprocess.Popen([mock], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.bootstrap = self.proc.stdout.readline().split()[1]

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def url(self, topic):
        return f"kafka://{self.bootstrap}/{topic}"

    def topic(self, topic):
        self.ask(f"topic {topic} 1")

    def publisher(self, topic):
        # Through the helper's own producer, each message sent at once and acknowledged (kcat -P reads its input
        # in blocks: a lone line would wait).
        def publish(lines):
            for line in lines:
                self.ask(f"produce {topic} 0 {line}")
        publish.close = lambda: None
        return publish

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait()


class Mqtt:
    name = "mqtt"

    def __init__(self, tmp):
        self.port = benchlib.free_port()
        conf = os.path.join(tmp, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
                    f"persistence_location {tmp}/\nlog_dest none\nmax_queued_messages 100000\n")
        self.proc = subprocess.Popen(["mosquitto", "-c", conf])
        wait_until("mosquitto", lambda: subprocess.run(["mosquitto_pub", "-p", str(self.port), "-t", "aoi/ping", "-m",
                                                        "x"], capture_output=True).returncode == 0)

    def url(self, topic):
        return f"mqtt://127.0.0.1:{self.port}/{topic}"

    def topic(self, topic):
        pass

    def publisher(self, topic):
        p = subprocess.Popen(["mosquitto_pub", "-p", str(self.port), "-t", topic, "-q", "1", "-l"],
                             stdin=subprocess.PIPE, text=True)

        def publish(lines):
            p.stdin.write("".join(line + "\n" for line in lines))
            p.stdin.flush()
        publish.close = lambda: (p.stdin.close(), p.wait())
        return publish

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Http:
    """Pushes over HTTP: the baseline, the same records through POST /v1/sessions/{id}/data."""
    name = "http"

    def __init__(self):
        self.aoi = None
        self.sid = None

    def publisher(self, _topic):
        # One kept-alive connection with Nagle off, as a streaming client would hold (http.client writes the
        # head and the body apart: with Nagle on, the body waits for the head's delayed acknowledgement).
        # Connected at the first publish: to the server the session is on by then.
        conn = None

        def publish(lines):
            nonlocal conn
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", self.aoi.port, timeout=60)
                conn.connect()
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                conn.request("POST", f"/v1/sessions/{self.sid}/data", body=json.dumps({"records": lines}),
                             headers={"content-type": "application/json"})
                r = conn.getresponse()
                body = r.read()
                if r.status not in (429, 507):
                    break
                time.sleep(0.01)  # the queue is full: as a client would, try again
            if r.status != 202:
                raise RuntimeError(f"push: {r.status} {body}")
        publish.close = lambda: conn and conn.close()
        return publish


SESSION = {"system": "Records follow.", "query_budget": 16, "retention": {"max_tokens": 3000}}


def new_session(aoi, system, sid, topic):
    body = dict(SESSION, id=sid)
    if system.name != "http":
        body["source"] = {"url": system.url(topic), "format": "text"}
    aoi.create(body)
    if system.name == "http":
        system.aoi, system.sid = aoi, sid


def latency(args, system, tag):
    """Seconds from publishing one record to its data_updated event, --samples of them."""
    aoi = Aoi(args)
    topic = f"lat-{tag}"
    getattr(system, "topic", lambda t: None)(topic)
    new_session(aoi, system, "lat", topic)
    events = Events(aoi, "lat")
    publish = system.publisher(topic)
    out = []
    try:
        for i in range(args.warmup + args.samples):
            version = aoi.session("lat")["data_version"] + 1
            t0 = time.monotonic()
            publish([f"rec-{i:05d} price={100 + i % 50}"])
            t1 = events.wait(version)
            if i >= args.warmup:
                out.append(t1 - t0)
            time.sleep(0.05)
    finally:
        publish.close()
        events.close()
        aoi.stop()
    return out


def rate(args, system, tag):
    """Records per second from a backlog of --backlog records to all of them ingested."""
    aoi = Aoi(args)
    topic = f"rate-{tag}"
    getattr(system, "topic", lambda t: None)(topic)
    publish = system.publisher(topic)
    lines = [f"row-{i:06d} v={i % 97}" for i in range(args.backlog)]
    try:
        if system.name in ("redis", "kafka"):
            # The backlog waits in the broker; the clock starts when the session (and its consumer) is made.
            for i in range(0, len(lines), 500):
                publish(lines[i:i + 500])
            if system.name == "kafka":
                wait_until("kafka holds the backlog", lambda: system.ask(f"end {topic} 0") == str(len(lines)))
            t0 = time.monotonic()
            new_session(aoi, system, "rate", topic)
        else:
            new_session(aoi, system, "rate", topic)
            t0 = time.monotonic()
            for i in range(0, len(lines), 100):
                publish(lines[i:i + 100])
        wait_until("the backlog ingested", lambda: (aoi.session("rate") or {}).get("tokens_ingested", 0) > 0 and
                   aoi.session("rate")["records"]["ingested"] >= len(lines), timeout=600, every=0.02)
        return len(lines) / (time.monotonic() - t0)
    finally:
        publish.close()
        aoi.stop()


def recovery(args, system, tag):
    """Seconds from restarting a killed aoi to the first new record ingested, and to /health, --recoveries times."""
    data = tempfile.mkdtemp(prefix="aoi-bench-sources-")
    topic = f"rec-{tag}"
    getattr(system, "topic", lambda t: None)(topic)
    publish = system.publisher(topic)
    stop = threading.Event()
    count = [0]

    def produce():
        while not stop.is_set():
            publish([f"live-{count[0]:06d}"])
            count[0] += 1
            time.sleep(0.01)

    first, ready = [], []
    try:
        aoi = Aoi(args, data)
        new_session(aoi, system, "rec", topic)
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        for _ in range(args.recoveries):
            wait_until("records ingested", lambda: (aoi.session("rec") or {}).get("records", {}).get("ingested", 0) > 0)
            aoi.kill()
            time.sleep(0.3)
            before = count[0]
            aoi = Aoi(args, data)
            held = aoi.session("rec")["source"]["position"]
            wait_until("a new record ingested", lambda: (aoi.session("rec") or {})["source"]["position"] != held and
                       aoi.session("rec")["last_seq_ingested"] == aoi.session("rec")["last_seq_pushed"], timeout=120)
            first.append(time.monotonic() - aoi.started)
            ready.append(aoi.ready - aoi.started)
            del before
        aoi.stop()
    finally:
        stop.set()
        time.sleep(0.05)
        publish.close()
        shutil.rmtree(data, ignore_errors=True)
    return first, ready


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aoi", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--kafka-mock", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--backlog", type=int, default=2000)
    ap.add_argument("--recoveries", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--brokers", default="redis,kafka,mqtt")
    ap.add_argument("--command", default=None)
    ap.add_argument("--commit", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="aoi-bench-brokers-")
    systems = [Http()]
    for name in args.brokers.split(","):
        sub = os.path.join(tmp, name)
        os.makedirs(sub)
        systems.append({"redis": lambda: Redis(sub), "kafka": lambda: Kafka(sub, args.kafka_mock),
                        "mqtt": lambda: Mqtt(sub)}[name]())
    rows = []
    try:
        for system in systems:
            lat = latency(args, system, system.name)
            rates = [rate(args, system, f"{system.name}{r}") for r in range(args.repeats)]
            first, ready = (recovery(args, system, system.name) if system.name != "http" else ([], []))
            rows.append((system.name, lat, rates, first, ready))
            print(f"{system.name}: latency p50 {statistics.median(lat) * 1000:.1f} ms, rate "
                  f"{statistics.median(rates):.0f} records/s", file=sys.stderr)
    finally:
        for system in systems:
            if hasattr(system, "stop"):
                system.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    http_p50 = statistics.median(rows[0][1])
    lines = [benchlib.measured_line(args.commit or benchlib.commit(), args.command or "bench/sources/run.sh"), "",
             f"aoi `--threads {args.threads}`, model `{os.path.basename(args.model)}`, every broker and aoi on "
             "loopback on this machine; sessions of text records, `overflow: lag`, the default ring. "
             f"Latency: {args.samples} records one at a time after {args.warmup} of warm-up; rate: a backlog of "
             f"{args.backlog} records, median of {args.repeats}; recovery: median of {args.recoveries} kill -9s "
             "with a producer publishing every 10 ms.", "",
             "| source | publish → `data_updated` p50 | p99 | p50 minus HTTP push's | consumed records/s | "
             "restart → first new record ingested | restart → `/health` |",
             "|---|---|---|---|---|---|---|"]
    for name, lat, rates, first, ready in rows:
        p50, p99 = statistics.median(lat) * 1000, pct(lat, 0.99) * 1000
        diff = "—" if name == "http" else f"{p50 - http_p50 * 1000:+.1f} ms"
        rec = f"{statistics.median(first):.2f} s" if first else "—"
        rdy = f"{statistics.median(ready):.2f} s" if ready else "—"
        label = "HTTP push (`POST /data`)" if name == "http" else name
        lines.append(f"| {label} | {p50:.1f} ms | {p99:.1f} ms | {diff} | {statistics.median(rates):.0f} | {rec} | "
                     f"{rdy} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
