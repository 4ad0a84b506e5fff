//! What the store's binding relies on: a statement rusqlite hands back from its cache
//! has every parameter NULL, whatever its last use bound, so the store binds no NULL by
//! number (`exec::bind`; a sized statement's spare rows are all NULL).

#[test]
fn a_cached_statement_comes_back_with_its_parameters_cleared() {
    let conn = rusqlite::Connection::open_in_memory().expect("open");
    let sql = "SELECT ?1, ?2";
    {
        let mut stmt = conn.prepare_cached(sql).expect("prepare");
        stmt.raw_bind_parameter(1, 7i64).expect("bind");
        stmt.raw_bind_parameter(2, "kept?").expect("bind");
        let mut rows = stmt.raw_query();
        let row = rows.next().expect("step").expect("a row");
        assert_eq!(row.get::<_, i64>(0).expect("?1"), 7);
    }
    // After an error too: a statement that failed goes back to the cache cleared.
    {
        let mut stmt = conn.prepare_cached(sql).expect("prepare");
        stmt.raw_bind_parameter(1, 8i64).expect("bind");
        assert!(stmt.raw_bind_parameter(3, 9i64).is_err(), "no ?3");
    }
    let mut stmt = conn.prepare_cached(sql).expect("from the cache");
    let mut rows = stmt.raw_query();
    let row = rows.next().expect("step").expect("a row");
    let first: Option<i64> = row.get(0).expect("?1");
    let second: Option<String> = row.get(1).expect("?2");
    assert_eq!(
        (first, second),
        (None, None),
        "nothing bound survives the cache"
    );
}
