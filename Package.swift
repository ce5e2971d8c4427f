// swift-tools-version:6.0
// pagesync: offline page sync over a libuv broker and device daemon. See docs/architecture.md.
import PackageDescription

let package = Package(
  name: "pagesync",
  products: [
    .library(name: "EventLoop", targets: ["EventLoop"]),
    .library(name: "Web", targets: ["Web"]),
    .library(name: "SyncModel", targets: ["SyncModel"]),
    .library(name: "SQLiteStore", targets: ["SQLiteStore"]),
  ],
  targets: [
    // System libraries: a module map and a shim header each, nothing else. No C type leaks past the
    // module that wraps it (EventLoop wraps libuv; Web wraps http-parser and libcrypto; SQLiteStore wraps
    // SQLite).
    .systemLibrary(name: "CLibUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
    .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    .systemLibrary(name: "CHTTPParser", providers: [.apt(["libhttp-parser-dev"])]),
    .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),

    // The only module that touches uv_*: loop, streams, timers, signals, wake-ups, workers, processes.
    .target(name: "EventLoop", dependencies: ["CLibUV"]),
    // The data model: ids, hybrid logical clocks, property values, mutations and their JSON, rejection codes.
    // Values and pure functions, no I/O.
    .target(name: "SyncModel"),
    // Helpers for tests of anything that runs on a loop: a bounded run with a watchdog, process output capture.
    .target(name: "EventLoopTestKit", dependencies: ["EventLoop"]),
    // HTTP/1.1 and WebSocket (RFC 6455), server and client, over EventLoop. Knows nothing of pages.
    .target(name: "Web", dependencies: ["EventLoop", "CHTTPParser", "CCrypto"]),
    // The broker's notification fan-out without I/O: channel index, per-subscriber coalescing queues.
    .target(name: "BrokerCore", dependencies: []),
    // The only module that touches sqlite3_*: connections, statements, transactions, migrations, and a
    // group-commit writer thread. No GRDB: it pulls Foundation + ICU into static binaries.
    .target(name: "SQLiteStore", dependencies: ["CSQLite", "EventLoop"]),

    .testTarget(name: "EventLoopTests", dependencies: ["EventLoop", "EventLoopTestKit"]),
    .testTarget(name: "BrokerCoreTests", dependencies: ["BrokerCore"]),
    // Python/ holds the scripts the interop tests run (python3 Tests/WebTests/Python/...), not resources.
    .testTarget(name: "SyncModelTests", dependencies: ["SyncModel"]),
    .testTarget(
      name: "WebTests", dependencies: ["Web", "EventLoop", "EventLoopTestKit"], exclude: ["Python"]),
    .testTarget(name: "SQLiteStoreTests", dependencies: ["SQLiteStore", "EventLoop", "EventLoopTestKit"]),
  ],
  swiftLanguageModes: [.v6]
)
