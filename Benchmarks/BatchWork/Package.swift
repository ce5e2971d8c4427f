// swift-tools-version:6.0
// The page store's heaviest batches, timed one by one on a store file: how long one batch can hold the broker's
// writer thread (docs/threat-model.md, "Work per batch"). A package of its own so that the main build does not
// carry it. Run: docs/benchmarks.md, "Work per batch".
import PackageDescription

let package = Package(
  name: "batch-work-bench",
  dependencies: [.package(name: "pagesync", path: "../..")],
  targets: [
    .executableTarget(
      name: "batch-work-bench",
      dependencies: [
        .product(name: "BrokerStore", package: "pagesync"),
        .product(name: "SQLiteStore", package: "pagesync"),
        .product(name: "SyncModel", package: "pagesync"), .product(name: "RichText", package: "pagesync"),
      ])
  ],
  swiftLanguageModes: [.v6]
)
