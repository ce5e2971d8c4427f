import SQLiteStore

extension LocalStore {
  /// The daemon store's schema, one migration per shipped version. Never edit a migration that has shipped: add
  /// the next one.
  ///
  /// `offline_page` and `offline_action` carry DESIGN.md's names. `offline_page.recent_rank` is the page's
  /// position in the recent visits (0 = most recent), NULL when it is not a recent origin: restoring the forest
  /// needs that order, and `offline_action` rows cannot hold it. `offline_page.complete` is 0 until the page's
  /// first download is stored (a page is shown offline only when complete). `mutation_queue.id` is the client
  /// mutation id; `data` is the mutation's JSON. `sent_mutation` keeps the newest acknowledged mutations (the
  /// same columns), so that a broker store restored from an older copy can be given them again. `sync_meta` holds `client_id`, `next_mutation_id`, `hlc`,
  /// `epoch`, `lastMutationAt`, `lastSyncAttempt`, `lastSuccessfulSync` as text. `missing_page` marks the offline
  /// pages the broker said this device may not see (`LocalStore.purge`): a table of its own, so that
  /// `offline_page` keeps DESIGN.md's columns, and a row only while its page is offline (`ON DELETE CASCADE`).
  static let migrations: [SQLiteMigration] = [
    SQLiteMigration(
      version: 1, name: "offline set, local pages and blocks, mutation queue, sync metadata",
      sql: """
        CREATE TABLE offline_page (
          page_id TEXT PRIMARY KEY,
          last_downloaded_timestamp INTEGER NOT NULL DEFAULT 0,
          complete INTEGER NOT NULL DEFAULT 0,
          recent_rank INTEGER
        );

        CREATE TABLE offline_action (
          origin_page_id TEXT NOT NULL,
          from_page_id TEXT,
          impacted_page_id TEXT NOT NULL,
          type TEXT NOT NULL CHECK (type IN ('toggled', 'favorite', 'recent')),
          UNIQUE (origin_page_id, impacted_page_id, type)
        );
        CREATE INDEX offline_action_impacted ON offline_action (impacted_page_id);

        CREATE TABLE local_page (
          id TEXT PRIMARY KEY,
          workspace TEXT,
          kind TEXT NOT NULL CHECK (kind IN ('page', 'database')),
          parent TEXT,
          title TEXT NOT NULL DEFAULT '',
          deleted INTEGER NOT NULL DEFAULT 0,
          properties TEXT NOT NULL DEFAULT '{}',
          databases TEXT,
          view TEXT,
          rows TEXT,
          last_updated INTEGER NOT NULL DEFAULT 0,
          sync_status TEXT NOT NULL DEFAULT 'synced' CHECK (sync_status IN ('synced', 'pending'))
        );

        CREATE TABLE local_block (
          id TEXT PRIMARY KEY,
          page_id TEXT NOT NULL,
          type TEXT NOT NULL,
          text TEXT NOT NULL,
          attributes TEXT NOT NULL DEFAULT '{}',
          position REAL NOT NULL,
          deleted INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX local_block_page ON local_block (page_id, position);

        CREATE TABLE mutation_queue (
          id INTEGER PRIMARY KEY,
          type TEXT NOT NULL,
          page_id TEXT NOT NULL,
          data TEXT NOT NULL,
          created_at_ms INTEGER NOT NULL,
          retry_count INTEGER NOT NULL DEFAULT 0,
          last_error TEXT,
          status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'rejected')),
          rejection_code INTEGER,
          rejection_name TEXT
        );
        CREATE INDEX mutation_queue_page ON mutation_queue (page_id, status);

        CREATE TABLE sync_meta (
          key TEXT PRIMARY KEY,
          value TEXT NOT NULL
        ) WITHOUT ROWID;
        """),
    SQLiteMigration(
      version: 2, name: "acknowledged mutations, kept to push again to a restored broker store",
      sql: """
        CREATE TABLE sent_mutation (
          id INTEGER PRIMARY KEY,
          type TEXT NOT NULL,
          page_id TEXT NOT NULL,
          data TEXT NOT NULL,
          created_at_ms INTEGER NOT NULL
        );
        """),
    // Block text became a CRDT (RichText). `crdt`: the block's state as merged here (the broker's plus this
    // device's unsent edits); `marks`: what it renders to; `legacy_text`: `text` shows a whole-text edit queued
    // before the upgrade (pushed as it is; the broker merges it as a diff). Blocks stored before have no state
    // until their page is downloaded again: pages with blocks are downloaded whole at the next catch-up, once
    // (their last_downloaded_timestamp set to 0; they stay complete, and shown, meanwhile).
    SQLiteMigration(
      version: 3, name: "block text as a CRDT state with marks",
      sql: """
        ALTER TABLE local_block ADD COLUMN crdt BLOB;
        ALTER TABLE local_block ADD COLUMN marks TEXT NOT NULL DEFAULT '[]';
        ALTER TABLE local_block ADD COLUMN legacy_text INTEGER NOT NULL DEFAULT 0;
        UPDATE offline_page SET last_downloaded_timestamp = 0
          WHERE page_id IN (SELECT DISTINCT page_id FROM local_block);
        """),
    // `found_at_ms`: when the broker first said so (this device's wall clock, for display only).
    SQLiteMigration(
      version: 4, name: "offline pages the broker says do not exist for this device",
      sql: """
        CREATE TABLE missing_page (
          page_id TEXT PRIMARY KEY REFERENCES offline_page (page_id) ON DELETE CASCADE,
          found_at_ms INTEGER NOT NULL
        );
        """),
  ]
}
