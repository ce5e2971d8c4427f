// swift-tools-version:6.0
// libFuzzer targets for the decoders that face the network, the page store, the daemon's local API and the
// configuration files. A package of its own because these executables only link with -sanitize=fuzzer. Build
// and run: `make fuzz` (docs/architecture.md, "Testing").
import PackageDescription

let package = Package(
  name: "pagesync-fuzz",
  dependencies: [
    .package(name: "pagesync", path: ".."),
    // The daemon's logger, turned down to critical in FuzzLocalAPI (the same version the main package uses).
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
  ],
  targets: [
    .target(name: "FuzzSupport"),
    .executableTarget(
      name: "FuzzHTTPRequest", dependencies: ["FuzzSupport", .product(name: "Web", package: "pagesync")]),
    .executableTarget(
      name: "FuzzWebSocketFrames", dependencies: ["FuzzSupport", .product(name: "Web", package: "pagesync")]),
    .executableTarget(
      name: "FuzzProtocolMessages",
      dependencies: [
        "FuzzSupport", .product(name: "ByteBuffers", package: "pagesync"),
        .product(name: "Web", package: "pagesync"),
        .product(name: "SyncModel", package: "pagesync"), .product(name: "SyncProtocol", package: "pagesync"),
        .product(name: "PagesyncClient", package: "pagesync"),
        .product(name: "StrictJSON", package: "pagesync"),
        .product(name: "StrictJSONTestKit", package: "pagesync"),
      ]),
    .executableTarget(
      name: "FuzzConfig",
      dependencies: [
        "FuzzSupport", .product(name: "TOMLConfig", package: "pagesync"),
        .product(name: "Broker", package: "pagesync"), .product(name: "Daemon", package: "pagesync"),
      ]),
    .executableTarget(
      name: "FuzzMutationBatch",
      dependencies: [
        "FuzzSupport", .product(name: "Web", package: "pagesync"),
        .product(name: "SyncModel", package: "pagesync"), .product(name: "BrokerStore", package: "pagesync"),
        .product(name: "SQLiteStore", package: "pagesync"), .product(name: "StrictJSON", package: "pagesync"),
        .product(name: "StrictJSONTestKit", package: "pagesync"),
      ]),
    .executableTarget(
      name: "FuzzTLS",
      dependencies: [
        "FuzzSupport", .product(name: "ByteBuffers", package: "pagesync"),
        .product(name: "EventLoop", package: "pagesync"), .product(name: "Web", package: "pagesync"),
      ]),
    .executableTarget(
      name: "FuzzJWT", dependencies: ["FuzzSupport", .product(name: "JSONWebToken", package: "pagesync")]),
    .executableTarget(
      name: "FuzzTextOps", dependencies: ["FuzzSupport", .product(name: "RichText", package: "pagesync")]),
    .executableTarget(
      name: "FuzzLocalAPI",
      dependencies: [
        "FuzzSupport", .product(name: "ByteBuffers", package: "pagesync"),
        .product(name: "Daemon", package: "pagesync"),
        .product(name: "Web", package: "pagesync"),
        .product(name: "EventLoop", package: "pagesync"),
        .product(name: "PagesyncClient", package: "pagesync"),
        .product(name: "SQLiteStore", package: "pagesync"), .product(name: "Logging", package: "swift-log"),
      ]),
  ],
  swiftLanguageModes: [.v6]
)
