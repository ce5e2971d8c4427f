import PostgresStore
import Testing

/// The one dialect switch: the store's SQL as PostgreSQL reads it.
@Suite struct PostgresSQLTests {
  @Test func placeholdersAreNumberedAsSQLiteNumbersThem() {
    #expect(
      PostgresSQL.translate("SELECT a FROM t WHERE b = ? AND c = ?") == (
        "SELECT a FROM t WHERE b = $1 AND c = $2", 2
      ))
    // ?NNN keeps its number; a bare ? after it takes the next after the highest so far.
    #expect(
      PostgresSQL.translate("WHERE id = ?1 AND page_id = ?2 OR x = ?1") == (
        "WHERE id = $1 AND page_id = $2 OR x = $1", 2
      ))
    #expect(PostgresSQL.translate("VALUES (?2, ?)") == ("VALUES ($2, $3)", 3))
    #expect(PostgresSQL.translate("SELECT 1") == ("SELECT 1", 0))
  }

  @Test func literalsAndQuotedNamesAreCopiedAsTheyAre() {
    #expect(
      PostgresSQL.translate("SELECT '?', 'it''s ?', \"a?b\" FROM t WHERE x = ?") == (
        "SELECT '?', 'it''s ?', \"a?b\" FROM t WHERE x = $1", 1
      ))
  }

  @Test func castAsBlobCountsUTF8BytesWithConvertTo() {
    #expect(
      PostgresSQL.translate("length(CAST(title AS BLOB)) + length(cast(p.value as blob))").sql
        == "length(convert_to(title, 'UTF8')) + length(convert_to(p.value, 'UTF8'))")
    // Only a column name inside: anything else is left for PostgreSQL to refuse.
    #expect(PostgresSQL.translate("CAST(1 + x AS BLOB)").sql == "CAST(1 + x AS BLOB)")
    #expect(PostgresSQL.translate("BROADCAST(x AS BLOB)").sql == "BROADCAST(x AS BLOB)")
  }
}
