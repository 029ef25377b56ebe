"""Apache Kafka's own broker and Java tools, run from the jars that `make kafka-libs` copies into
build/kafka-libs/ (tools/kafka/pom.xml pins the one Kafka version).

`KafkaBroker` formats a KRaft storage directory and runs one combined broker+controller JVM on
127.0.0.1 with free ports; `stop()` sends SIGTERM, then SIGKILL. `run_tool` runs a tool's main
class to completion within a timeout; `JavaProcess` runs one in the background (a console
consumer that must stay in its group while the test looks at it). `compiled_classes` compiles
one of the tests' own Java programs (tests/kafka/java/) with `javac` against the same jars, once
per source and jar set. Every JVM starts under
`setpriv --pdeathsig KILL`, so it dies with the process that started it even when pytest is
killed before its fixtures can stop anything: no orphaned JVMs.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient

REPO_ROOT = Path(__file__).resolve().parents[2]
LIBS_DIR = REPO_ROOT / "build" / "kafka-libs"
LOG4J_DIR = REPO_ROOT / "tools" / "kafka"
JAVA_SOURCES_DIR = REPO_ROOT / "tests" / "kafka" / "java"
CLASSES_DIR = REPO_ROOT / "build" / "java-classes"
CDS_DIR = REPO_ROOT / "build" / "java-cds"

BROKER_MAIN = "kafka.Kafka"
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"
CONSUMER_GROUPS_MAIN = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONSOLE_CONSUMER_MAIN = "org.apache.kafka.tools.consumer.ConsoleConsumer"

# The tests' JVMs. 2 cores shared by many processes: small heaps, the serial collector and C1
# only (the tests run seconds, not hours, so peak JIT throughput is not worth the compile
# threads' CPU).
_TEST_JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
TEST_BROKER_JVM = ("-Xms128m", "-Xmx512m", *_TEST_JVM_FLAGS)
TOOL_JVM = ("-Xms32m", "-Xmx256m", *_TEST_JVM_FLAGS)
# A broker's JVM as Kafka ships it: bin/kafka-server-start.sh's heap and bin/kafka-run-class.sh's
# KAFKA_JVM_PERFORMANCE_OPTS (Kafka 4.3). The benchmarks compare against this broker, with its
# full JIT and G1, not against the tests' trimmed one.
SHIPPED_BROKER_JVM = (
    "-Xmx1G",
    "-Xms1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)

BROKER_READY_TIMEOUT_S = 120.0
BROKER_STOP_TIMEOUT_S = 30.0
FORMAT_TIMEOUT_S = 120.0
JAVAC_TIMEOUT_S = 120.0
CDS_DUMP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ToolResult:
    """What one finished Java tool run returned."""

    returncode: int
    stdout: str
    stderr: str


def libs_classpath() -> str:
    """The classpath of every Kafka jar; a clear error if `make kafka-libs` has not run."""
    if not any(LIBS_DIR.glob("kafka-tools-*.jar")):
        raise RuntimeError(f"Kafka jars missing in {LIBS_DIR}: run `make kafka-libs` first")
    return str(LIBS_DIR / "*")


def _jars_digest(prefix: bytes):
    """A sha256 of `prefix` and of the Kafka jars' names: it changes with the Kafka version."""
    digest = hashlib.sha256(prefix)
    for jar in sorted(LIBS_DIR.glob("*.jar")):
        digest.update(jar.name.encode())
    return digest


def compiled_classes(source: Path) -> Path:
    """The directory holding `source` compiled against the Kafka jars. It is named by a hash of
    the source and of the jars' names, so a changed program or Kafka version compiles afresh
    and an unchanged one is reused by later runs; a failed compile raises with javac's output."""
    digest = _jars_digest(source.read_bytes())
    out = CLASSES_DIR / f"{source.stem}-{digest.hexdigest()[:16]}"
    if out.is_dir():
        return out
    CLASSES_DIR.mkdir(parents=True, exist_ok=True)
    # Compiled aside and renamed into place, so a killed compile never leaves a partial `out`.
    staging = Path(tempfile.mkdtemp(prefix=f".{source.stem}-", dir=CLASSES_DIR))
    try:
        done = subprocess.run(
            ["javac", "-cp", libs_classpath(), "-d", str(staging), str(source)],
            capture_output=True,
            text=True,
            timeout=JAVAC_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"javac {source.name} failed ({done.returncode}):\n{done.stderr}")
        try:
            staging.rename(out)
        except OSError:
            if not out.is_dir():
                raise
            # Another pytest worker compiled the same program first: the same classes.
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


@functools.cache  # where no archive could be made, a process does not try again per tool
def tools_archive() -> Path | None:
    """The class-data-sharing archive (JDK 17's dynamic AppCDS) of the classes Kafka's tools
    load, or None where it could not be made. A tool's JVM maps them instead of loading and
    verifying them: about 0.8 CPU-seconds a start here against 1.3 (the suite starts some 57).

    Made once per jar set and JVM (the name hashes both): a `kafka-consumer-groups --list`
    against a closed port loads the admin client and the tools' framework and dumps them at
    exit. A lock file lets one pytest worker make it while the others wait."""
    java = os.path.realpath(shutil.which("java") or "java")
    archive = CDS_DIR / f"tools-{_jars_digest(java.encode()).hexdigest()[:16]}.jsa"
    if archive.exists():
        return archive
    CDS_DIR.mkdir(parents=True, exist_ok=True)
    with open(CDS_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if archive.exists():
            return archive
        staging = archive.with_name(f".{archive.name}.{os.getpid()}")
        closed = f"127.0.0.1:{free_ports(1)[0]}"
        try:
            subprocess.run(
                java_command(
                    CONSUMER_GROUPS_MAIN,
                    ["--bootstrap-server", closed, "--list", "--timeout", "1000"],
                    jvm=(*TOOL_JVM, f"-XX:ArchiveClassesAtExit={staging}"),
                ),
                capture_output=True,
                timeout=CDS_DUMP_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            staging.unlink(missing_ok=True)  # killed mid-dump: no half an archive
        if not staging.exists():
            return None
        staging.rename(archive)
    return archive


def tool_jvm() -> tuple[str, ...]:
    """The JVM options of a Kafka tool's run: `TOOL_JVM`, with the tools' archive where there is
    one. CDS's logging is off, so an archive the JVM cannot use is passed over in silence and a
    tool's output never carries its warnings."""
    archive = tools_archive()
    if archive is None:
        return TOOL_JVM
    return (*TOOL_JVM, f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def java_command(
    main_class: str,
    args: list[str],
    *,
    jvm: tuple[str, ...],
    log4j_config: str = "log4j2-tools.xml",
    classes: Path | None = None,
) -> list[str]:
    """The command line running `main_class` from the Kafka jars (and `classes`, a directory of
    the tests' own compiled classes), tied to its parent's life."""
    classpath = libs_classpath() if classes is None else f"{classes}:{libs_classpath()}"
    return [
        "setpriv",
        "--pdeathsig",
        "KILL",
        "java",
        *jvm,
        f"-Dlog4j2.configurationFile={LOG4J_DIR / log4j_config}",
        "-cp",
        classpath,
        main_class,
        *args,
    ]


def run_tool(
    main_class: str, args: list[str], timeout_s: float, *, classes: Path | None = None
) -> ToolResult:
    """Run a Kafka tool (or a main class in `classes`) to completion; on timeout it is killed
    and TimeoutExpired raised."""
    done = subprocess.run(
        java_command(main_class, args, jvm=TOOL_JVM if classes else tool_jvm(), classes=classes),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return ToolResult(done.returncode, done.stdout, done.stderr)


def stop_process(proc: subprocess.Popen, timeout_s: float) -> int:
    """SIGTERM (a JVM runs its shutdown hooks: a consumer leaves its group), then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout_s)
    return proc.returncode


class JavaProcess:
    """A Kafka tool running in the background, its output going to files in `work_dir`."""

    def __init__(self, main_class: str, args: list[str], work_dir: Path) -> None:
        work_dir.mkdir(parents=True, exist_ok=True)
        self.stdout_path = work_dir / "stdout"
        self.stderr_path = work_dir / "stderr"
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                java_command(main_class, args, jvm=tool_jvm()),
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait(self, timeout_s: float) -> int:
        """Wait for it to exit by itself; TimeoutExpired if it has not within `timeout_s`."""
        return self.proc.wait(timeout_s)

    def stop(self, timeout_s: float = 20.0) -> int:
        return stop_process(self.proc, timeout_s)


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports the kernel just handed out (held together, so distinct)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports


# The tests' broker on 2 shared cores: fewer threads than Kafka's defaults (3 network, 8 I/O and
# 10 background threads) and a smaller buffer for the log cleaner (the offsets topic is
# compacted; 128 MiB by default).
_TEST_TRIMS = {
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
}


def broker_properties(
    node_id: int, broker_port: int, controller_port: int, log_dir: Path, *, trimmed: bool = True
) -> dict[str, str]:
    """A single combined-mode node: loopback only, replication factor 1 everywhere and no
    initial rebalance delay; ``trimmed``, the tests' fewer threads (``_TEST_TRIMS``). Kafka 4.3
    enables both group protocols, classic and KIP-848's consumer, by default;
    `group.coordinator.rebalance.protocols` is deprecated there (setting it logs a warning and
    disables the protocols it leaves out), so it is not set."""
    return {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": f"{node_id}@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        # Kafka's default of 50 offsets partitions makes the first group request slow to serve.
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # KIP-848 members rebalance through heartbeats: the default 5 s interval is slow.
        "group.consumer.min.heartbeat.interval.ms": "500",
        "group.consumer.heartbeat.interval.ms": "500",
        # Kafka 4.3 batches consumer-group assignments (KIP-1263: at most one assignor run a
        # second, on a background thread); groupcoord assigns in the heartbeat that changed
        # the group, as Kafka did before: interval 0 and no offload make Kafka do the same.
        "group.consumer.assignment.interval.ms": "0",
        "group.consumer.assignor.offload.enable": "false",
        # Kafka's default, as groupcoord's (CoordinatorConfig.consumer_group_migration_policy):
        # classic groups upgrade and consumer groups downgrade online.
        "group.consumer.migration.policy": "bidirectional",
    } | (_TEST_TRIMS if trimmed else {})


def kafka_uuid() -> str:
    """A random Kafka Uuid in Kafka's text form (URL-safe base64 without padding). Like Kafka's
    Uuid.randomUuid, never one starting with "-", which command lines read as an option
    (kafka-storage format --cluster-id fails on it)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


class KafkaBroker:
    """One real Apache Kafka node (KRaft, combined broker+controller) in `work_dir`."""

    def __init__(
        self,
        work_dir: Path,
        node_id: int = 1,
        overrides: dict[str, str] | None = None,
        *,
        shipped: bool = False,
    ) -> None:
        """``overrides``: broker properties set over `broker_properties`' (a benchmark's);
        ``shipped``: Kafka's own JVM options and thread counts, not the tests' trimmed ones."""
        self.work_dir = work_dir
        self.node_id = node_id
        self.overrides = dict(overrides or {})
        self.shipped = shipped
        self.broker_port, self.controller_port = free_ports(2)
        self.bootstrap = f"127.0.0.1:{self.broker_port}"
        self.log_path = work_dir / "broker.log"
        self.config_path = work_dir / "server.properties"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        """Format the storage, start the JVM and return once it answers Metadata listing
        itself; raises (with the log's tail) if it exits or is not ready in time."""
        props = self.properties()
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        formatted = run_tool(
            STORAGE_TOOL_MAIN,
            ["format", "--cluster-id", kafka_uuid(), "--config", str(self.config_path)],
            FORMAT_TIMEOUT_S,
        )
        if formatted.returncode != 0:
            raise RuntimeError(
                f"kafka-storage format failed ({formatted.returncode}):\n"
                f"{formatted.stdout}{formatted.stderr}"
            )
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.work_dir,
            )
        try:
            self._wait_ready(BROKER_READY_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise

    @property
    def jvm(self) -> tuple[str, ...]:
        """The JVM's options: Kafka's own (``shipped``) or the tests'."""
        return SHIPPED_BROKER_JVM if self.shipped else TEST_BROKER_JVM

    def properties(self) -> dict[str, str]:
        """The broker's server.properties."""
        data = self.work_dir / "data"
        own = broker_properties(
            self.node_id, self.broker_port, self.controller_port, data, trimmed=not self.shipped
        )
        return own | self.overrides

    def command(self) -> list[str]:
        """The command line that runs this broker's JVM."""
        return java_command(
            BROKER_MAIN, [str(self.config_path)], jvm=self.jvm, log4j_config="log4j2-broker.xml"
        )

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        admin = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"Kafka broker exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            if admin is None and _accepts(self.broker_port):
                # librdkafka logs at level 3 for every refused connection: keep it quiet here.
                admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
            if admin is not None:
                with contextlib.suppress(Exception):
                    if self.node_id in admin.list_topics(timeout=2).brokers:
                        return
            time.sleep(0.2)
        raise RuntimeError(f"Kafka broker not ready after {timeout_s:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, BROKER_STOP_TIMEOUT_S)


def benchmark_broker(work_dir: Path, overrides: dict[str, str] | None = None) -> KafkaBroker:
    """The broker a benchmark compares against: Kafka's JVM and thread counts as shipped."""
    return KafkaBroker(work_dir, overrides=overrides, shipped=True)


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0
