// swift-tools-version:6.0
// pagesync: offline page sync over a libuv broker and device daemon. See docs/architecture.md.
import PackageDescription

// Release builds of the modules every notification passes through (loop, bytes, HTTP and WebSocket, fan-out,
// broker wiring) skip the runtime's dynamic exclusivity checks: a `changed` frame to one subscriber made ~20 of
// them (class properties touched with `inout`/mutating calls), ~200 instructions each with libswiftCore's
// thread-local access set, most of the user-space work of a frame (docs/benchmarks.md, "B1 at low rates").
// Debug builds, which every test, sanitizer and fuzz build uses, keep the checks, so a conflicting access is
// still caught there.
let fanOutPathSettings: [SwiftSetting] = [
  .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))
]

let package = Package(
  name: "pagesync",
  products: [
    .executable(name: "pagesync-broker", targets: ["pagesync-broker"]),
    .executable(name: "pagesyncd", targets: ["pagesyncd"]),
    .executable(name: "pagesync", targets: ["pagesync"]),
    .executable(name: "pagesync-load", targets: ["pagesync-load"]),
    .library(name: "ByteBuffers", targets: ["ByteBuffers"]),
    .library(name: "EventLoop", targets: ["EventLoop"]),
    .library(name: "Web", targets: ["Web"]),
    .library(name: "SyncModel", targets: ["SyncModel"]),
    .library(name: "RichText", targets: ["RichText"]),
    .library(name: "StrictJSON", targets: ["StrictJSON"]),
    // JSON Web Token verification over libcrypto (the broker's [[auth.jwt]]; the fuzz target FuzzJWT).
    .library(name: "JSONWebToken", targets: ["JSONWebToken"]),
    // The strict reader's oracle and agreement check, for tests and the fuzz targets that hold the broker's
    // readers to JSONDecoder.
    .library(name: "StrictJSONTestKit", targets: ["StrictJSONTestKit"]),
    .library(name: "SQLiteStore", targets: ["SQLiteStore"]),
    // What the libFuzzer targets in Fuzz/ (a package of its own) drive: the protocol's messages, the page
    // store, both configurations, the daemon's local API and what pagesync reads from it.
    .library(name: "BrokerStore", targets: ["BrokerStore"]),
    .library(name: "SyncProtocol", targets: ["SyncProtocol"]),
    .library(name: "TOMLConfig", targets: ["TOMLConfig"]),
    .library(name: "Broker", targets: ["Broker"]),
    .library(name: "Daemon", targets: ["Daemon"]),
    .library(name: "PagesyncCLI", targets: ["PagesyncCLI"]),
    // The client of the daemon's local API for apps on the device (docs/client.md).
    .library(name: "PagesyncClient", targets: ["PagesyncClient"]),
  ],
  dependencies: [
    // Structured logging with metadata (broker.connection.id, broker.user, ...).
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    // The command lines of the programs.
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    // The broker's GET /metrics: Prometheus text exposition from a registry of atomic counters and gauges.
    // Pulls in only swift-atomics and CoreMetrics (no NIO, no Foundation).
    .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    // pagesync-load's latency percentiles: HdrHistogram keeps p99.9 and max exact to 3 significant digits in
    // fixed memory, however many samples a run records.
    .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
  ],
  targets: [
    // System libraries: a module map and a shim header each, nothing else. No C type leaks past the module that
    // wraps it (EventLoop wraps libuv; Web wraps http-parser, libcrypto and libssl; SQLiteStore wraps SQLite; RichText wraps
    // zlib).
    .systemLibrary(name: "CLibUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
    .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
    .systemLibrary(name: "CHTTPParser", providers: [.apt(["libhttp-parser-dev"])]),
    .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
    // libssl beside it: TLS for both programs, driven through memory BIOs on the loop (Web's TLSSession).
    .systemLibrary(name: "CSSL", pkgConfig: "libssl", providers: [.apt(["libssl-dev"])]),
    // glibc's malloc statistics (mallinfo2): the load harness's heap figures (pagesync-load text).
    .systemLibrary(name: "CMallocInfo"),
    // zlib's raw deflate: the text of a block's stored state (RichText's state version 2).
    .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),

    // Foundation layer.
    // `ByteBuffer`: bytes with reader and writer indices, shared copy-on-write; no libuv, so the codecs that only
    // move bytes do not need an event loop.
    .target(name: "ByteBuffers", swiftSettings: fanOutPathSettings),
    // The only module that touches uv_*: loop, streams, timers, signals, wake-ups, workers, processes.
    .target(name: "EventLoop", dependencies: ["CLibUV", "ByteBuffers"], swiftSettings: fanOutPathSettings),
    // SplitMix64: the seeded generator of the load harness's workloads and of the seeded random tests.
    .target(name: "SeededRandom"),
    // Exponential backoff with full jitter, I/O-free (the daemon's reconnects to the broker, the broker's to its
    // bus).
    .target(name: "Backoff"),
    // The Redis serialization protocol (RESP2): an incremental, bounded decoder and the command encoder; no I/O.
    // The broker's Redis bus and the load harness's Redis clients both speak it.
    .target(name: "RedisWire"),
    // Block text as a sequence CRDT with marks (FugueMax + Peritext): I/O-free; zlib only to deflate a state's
    // text.
    .target(name: "RichText", dependencies: ["CZlib"]),
    // A strict JSON reader (RFC 8259) over UTF-8 bytes, for hand-written decoders of hot request bodies: no
    // tree, no Foundation. The broker's batch, catch-up, fetch and stream messages are read with it.
    .target(name: "StrictJSON"),
    // JSON Web Tokens (RFC 7515, 7519) and JWK Sets (RFC 7517) verified over libcrypto: HS256, RS256, ES256,
    // EdDSA; claims read with StrictJSON; a bounded cache of verified tokens. No I/O, the clock an argument.
    // Not vapor/jwt-kit: docs/architecture.md, "JSON Web Tokens".
    .target(name: "JSONWebToken", dependencies: ["CCrypto", "StrictJSON"]),
    // HTTP/1.1 and WebSocket (RFC 6455), server and client, over EventLoop. Knows nothing of pages.
    .target(
      name: "Web",
      dependencies: ["ByteBuffers", "EventLoop", "CHTTPParser", "CCrypto", "CSSL", "StrictJSON"],
      swiftSettings: fanOutPathSettings),
    // The only module that touches sqlite3_*: connections, statements, transactions, migrations, and a
    // group-commit writer thread. No GRDB: it pulls Foundation + ICU into static binaries.
    .target(name: "StoreInterface"),
    .target(name: "SQLiteStore", dependencies: ["CSQLite", "EventLoop", "StoreInterface"]),
    .target(name: "PostgresStore", dependencies: ["CLibPQ", "StoreInterface"]),
    .target(name: "PostgresTestKit", dependencies: ["PostgresStore", "EventLoop", "EventLoopTestKit"]),
    // toml++ (Debian's libtomlplusplus, the shared library: security fixes arrive with the system's updates)
    // behind a small C API (include/ctoml.h), so no Swift module needs C++ interop. Not TOMLKit: its objects
    // autolink full Foundation and ICU into every program that reads a configuration (docs/architecture.md).
    .target(
      name: "CTOML",
      cxxSettings: [.define("TOML_HEADER_ONLY", to: "0"), .define("TOML_SHARED_LIB", to: "1")],
      linkerSettings: [.linkedLibrary("tomlplusplus")]),
    // Strict TOML configuration reading: typed, range-checked keys; unknown keys and bad values name the line.
    // Also what SIGHUP does with a new file in both programs (ReloadPlan).
    .target(
      name: "TOMLConfig",
      dependencies: [
        "CTOML", .product(name: "Logging", package: "swift-log"),
      ]),
    // systemd's notification protocol without libsystemd: READY/STATUS/RELOADING/STOPPING, and the watchdog fed
    // from the service's loop (a stuck loop stops feeding it).
    .target(name: "ServiceManager", dependencies: ["EventLoop"]),
    // Helpers for tests of anything that runs on a loop: a bounded run with a watchdog, process output capture,
    // a datagram receiver standing in for systemd's notification socket, a recorder of what a logger logged.
    .target(
      name: "EventLoopTestKit",
      dependencies: ["EventLoop", "SeededRandom", .product(name: "Logging", package: "swift-log")]),
    // What the offline forest's tests share (DaemonCoreTests, DaemonStoreTests): a page structure made of
    // dictionaries, ids from literals.
    .target(name: "DaemonCoreTestKit", dependencies: ["DaemonCore", "SyncModel"]),
    // Helpers for tests of JSON readers: an independent strict parser (the oracle), a writer of many spellings,
    // seeded damage to valid JSON, and the check that a strict reader agrees with JSONDecoder.
    .target(name: "StrictJSONTestKit", dependencies: ["StrictJSON", "Web"]),

    // The data model: ids, hybrid logical clocks, property values, mutations and their JSON, rejection codes.
    // Values and pure functions, no I/O.
    .target(name: "SyncModel", dependencies: ["StrictJSON", "RichText"]),

    // The broker.
    // Notification fan-out without I/O: channel index, per-subscriber coalescing queues.
    // Also the bus's pure logic: its message, which channels to (un)subscribe, the link's reconnect states.
    .target(name: "BrokerCore", dependencies: ["Backoff"], swiftSettings: fanOutPathSettings),
    // The page store: schema, batch application (exactly once, last writer wins), change log, deltas.
    .target(name: "BrokerStore", dependencies: ["SQLiteStore", "StoreInterface", "SyncModel", "RichText"]),
    // The JSON messages of the broker's API (docs/protocol.md), shared by the broker and its clients.
    .target(name: "SyncProtocol", dependencies: ["SyncModel", "StrictJSON"]),
    // Wiring: configuration, auth, routes, device streams, lifecycle.
    .target(
      name: "Broker",
      dependencies: [
        "ByteBuffers", "BrokerCore", "BrokerStore", "SyncProtocol", "SQLiteStore", "SyncModel", "StrictJSON",
        "PostgresStore", "StoreInterface",
        "TOMLConfig", "JSONWebToken", "RedisWire",
        "Web", "ServiceManager", "CMallocInfo", .product(name: "Logging", package: "swift-log"),
        .product(name: "Prometheus", package: "swift-prometheus"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
      ],
      swiftSettings: fanOutPathSettings),
    .executableTarget(
      name: "pagesync-broker",
      dependencies: ["Broker", .product(name: "ArgumentParser", package: "swift-argument-parser")]),

    // The device daemon.
    // The offline forest (why each page is offline, and the minimal rows to write), without I/O.
    .target(name: "DaemonCore", dependencies: ["SyncModel", "RichText", "Backoff"]),
    // The daemon's local SQLite store: offline set, local pages and blocks, mutation queue, sync metadata.
    .target(
      name: "DaemonStore", dependencies: ["SQLiteStore", "SyncModel", "DaemonCore", "RichText", "StrictJSON"]),
    // Wiring: configuration, the broker link (HTTP + the device stream), the sync driver, the local API.
    .target(
      name: "Daemon",
      dependencies: [
        "ByteBuffers", "DaemonCore", "DaemonStore", "RichText", "SQLiteStore", "SyncModel", "SyncProtocol",
        "StrictJSON",
        "TOMLConfig", "Web", "EventLoop", "ServiceManager", "CMallocInfo",
        .product(name: "Logging", package: "swift-log"),
      ]),
    .executableTarget(
      name: "pagesyncd",
      dependencies: ["Daemon", .product(name: "ArgumentParser", package: "swift-argument-parser")]),

    // The typed client of the daemon's local API, for apps and for pagesync: requests and their answers, errors,
    // the change stream as an AsyncSequence (its reader on a libuv loop of its own), a Server-Sent Events parser.
    // No SyncModel: an app needs none of the sync machinery to talk to the daemon.
    .target(name: "PagesyncClient", dependencies: ["ByteBuffers", "EventLoop", "Web"]),
    // The command line of the daemon's local API: commands, tables and JSON output, over PagesyncClient.
    .target(
      name: "PagesyncCLI",
      dependencies: [
        "PagesyncClient", "ByteBuffers", "EventLoop", "Web", "SyncModel",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ]),
    .executableTarget(name: "pagesync", dependencies: ["PagesyncCLI"]),

    // The load harness (docs/benchmarks.md).
    // What a load run decides without I/O: the open-loop schedule, delivery bookkeeping under coalescing,
    // latency summaries, RESP framing, the report's table and JSON (written and read back), its plots (HTML and SVG).
    .target(
      name: "LoadCore",
      dependencies: [
        "SeededRandom", "RedisWire", "StrictJSON", .product(name: "Histogram", package: "hdrhistogram-swift"),
      ]),
    // Wiring: the broker and redis-server as child processes, device streams, writers and RESP clients on one loop;
    // and the rich-text benchmark on editing traces (`pagesync-load text`).
    .target(
      name: "LoadHarness",
      dependencies: [
        "LoadCore", "ByteBuffers", "EventLoop", "SeededRandom", "Web", "RichText", "StrictJSON",
        "CMallocInfo", "EventLoopTestKit", "PostgresTestKit",
      ]),
    .executableTarget(
      name: "pagesync-load",
      dependencies: [
        "LoadHarness", "LoadCore", .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ]),

    .testTarget(name: "EventLoopTests", dependencies: ["ByteBuffers", "EventLoop", "EventLoopTestKit"]),
    .testTarget(
      name: "ServiceManagerTests", dependencies: ["ServiceManager", "EventLoop", "EventLoopTestKit"]),
    // Python/ holds the scripts the interop tests run (python3 Tests/WebTests/Python/...), not resources.
    .testTarget(
      name: "WebTests", dependencies: ["ByteBuffers", "Web", "EventLoop", "EventLoopTestKit"],
      exclude: ["Python"]),
    .testTarget(
      name: "SQLiteStoreTests", dependencies: ["SQLiteStore", "CSQLite", "EventLoop", "EventLoopTestKit"]),
    .testTarget(name: "PostgresStoreTests", dependencies: ["PostgresStore"]),
    .testTarget(name: "TOMLConfigTests", dependencies: ["TOMLConfig"]),
    .testTarget(
      name: "StrictJSONTests", dependencies: ["StrictJSON", "StrictJSONTestKit", "EventLoopTestKit"]),
    .testTarget(
      name: "SyncModelTests",
      dependencies: ["SyncModel", "RichText", "StrictJSON", "StrictJSONTestKit", "EventLoopTestKit"]),
    .testTarget(
      name: "SyncProtocolTests",
      dependencies: [
        "ByteBuffers",
        "SyncProtocol", "SyncModel", "StrictJSON", "StrictJSONTestKit", "Web", "EventLoop",
        "EventLoopTestKit",
      ]),
    .testTarget(name: "JSONWebTokenTests", dependencies: ["JSONWebToken", "Web"]),
    .testTarget(name: "LoadCoreTests", dependencies: ["LoadCore", "SeededRandom"]),
    .testTarget(name: "RichTextTests", dependencies: ["RichText", "SeededRandom", "EventLoopTestKit"]),
    .testTarget(name: "BrokerCoreTests", dependencies: ["BrokerCore", "Backoff", "EventLoopTestKit"]),
    .testTarget(
      name: "BrokerStoreTests",
      dependencies: [
        "BrokerStore", "RichText", "SQLiteStore", "SyncModel", "EventLoop", "EventLoopTestKit",
        "PostgresStore",
        "PostgresTestKit",
      ]),
    .testTarget(
      name: "BrokerTests",
      dependencies: [
        "ByteBuffers",
        "Broker", "BrokerCore", "BrokerStore", "EventLoop", "EventLoopTestKit", "SQLiteStore", "SyncModel",
        "SyncProtocol", "TOMLConfig", "Web", "JSONWebToken", .product(name: "Logging", package: "swift-log"),
      ]),
    .testTarget(
      name: "DaemonCoreTests",
      dependencies: ["DaemonCore", "DaemonCoreTestKit", "SyncModel", "EventLoopTestKit", "SeededRandom"]),
    .testTarget(
      name: "DaemonStoreTests",
      dependencies: [
        "DaemonStore", "RichText", "SQLiteStore", "SyncModel", "DaemonCore", "DaemonCoreTestKit", "EventLoop",
        "EventLoopTestKit",
      ]),
    .testTarget(
      name: "DaemonTests",
      dependencies: [
        "ByteBuffers", "DaemonCoreTestKit",
        "Daemon", "DaemonCore", "DaemonStore", "SyncModel", "SyncProtocol", "StrictJSON",
        "StrictJSONTestKit", "TOMLConfig", "EventLoop", "EventLoopTestKit", "Web", "SQLiteStore",
        // madvise(MADV_PAGEOUT) checked on a mapping of the test's own (PageOutTests.swift).
        "CMallocInfo",
        .product(name: "Logging", package: "swift-log"),
        // A real broker in-process, on the daemon's loop, for the token tests (RealBrokerTokenTests.swift).
        "Broker",
      ]),
    .testTarget(
      name: "PagesyncClientTests",
      dependencies: ["PagesyncClient", "ByteBuffers", "Web", "EventLoop", "EventLoopTestKit"]),
    .testTarget(
      name: "PagesyncCLITests",
      dependencies: ["ByteBuffers", "PagesyncCLI", "PagesyncClient", "Web", "EventLoop", "EventLoopTestKit"]),
    // Real processes on loopback: the broker driven by curl and Python (urllib, websockets); the daemons driven
    // through the built pagesync, their stores read with the sqlite3 command line.
    .testTarget(
      name: "IntegrationTests",
      dependencies: ["EventLoop", "EventLoopTestKit", "PostgresStore", "PostgresTestKit"],
      exclude: ["Python"]),
  ],
  swiftLanguageModes: [.v6],
  // toml++ needs C++17 (the CTOML shim).
  cxxLanguageStandard: .cxx17
)
