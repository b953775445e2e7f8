-- +goose Up
-- Dashboard terminal tickets: a short-lived, single-use proof that a
-- signed-in page (its session, its CSRF token) asked to open one terminal
-- (sandbox, pid). A browser's WebSocket carries no custom header, so the
-- ticket travels in the WebSocket's URL; only its SHA-256 is stored, and
-- taking it deletes the row, so it opens one connection, on any server that
-- shares this store.
CREATE TABLE dashboard_tickets (
    ticket_hash   TEXT PRIMARY KEY,
    session_hash  TEXT NOT NULL,
    sandbox_id    TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
);
CREATE INDEX dashboard_tickets_session ON dashboard_tickets(session_hash);
CREATE INDEX dashboard_tickets_expires ON dashboard_tickets(expires_at);

-- +goose Down
DROP TABLE dashboard_tickets;
