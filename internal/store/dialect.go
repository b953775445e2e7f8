package store

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is the one place where SQLite and PostgreSQL differ. Queries are
// written once, in SQLite's spelling with `?` placeholders and portable SQL
// (INSERT ... ON CONFLICT ... DO UPDATE/NOTHING works in both); the few
// expressions that cannot be portable come from the methods below.
type dialect int

const (
	dialectSQLite dialect = iota
	dialectPostgres
)

// rebind turns `?` placeholders into PostgreSQL's `$1, $2, ...`. A `?`
// inside a quoted string or identifier is left alone.
func (d dialect) rebind(q string) string {
	if d != dialectPostgres || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// args adapts bound values: the schema keeps flags as INTEGER 0/1 in both
// databases, SQLite's driver writes a Go bool as 0/1, PostgreSQL's does not,
// so bools become 0/1 here. (Reading back into a bool works in both:
// database/sql converts 0/1.)
func (d dialect) args(args []any) []any {
	if d != dialectPostgres {
		return args
	}
	out := args
	for i, a := range args {
		if b, ok := a.(bool); ok {
			if &out[0] == &args[0] {
				out = append([]any(nil), args...) // never change the caller's slice
			}
			out[i] = boolInt(b)
		}
	}
	return out
}

// jsonField is an expression for the text value of one top-level key of a
// JSON object kept as TEXT in col, and the bound value that names the key.
func (d dialect) jsonField(col, key string) (expr string, arg any) {
	if d == dialectPostgres {
		return `(` + col + `::jsonb ->> ?)`, key
	}
	return `json_extract(` + col + `, ?)`, `$."` + strings.ReplaceAll(key, `"`, `\"`) + `"`
}

// utcDay is an expression for the UTC day (YYYY-MM-DD) of the Unix
// millisecond time in the integer expression ms.
func (d dialect) utcDay(ms string) string {
	if d == dialectPostgres {
		return `to_char(to_timestamp((` + ms + `) / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')`
	}
	return `strftime('%Y-%m-%d', (` + ms + `) / 1000, 'unixepoch')`
}

// forUpdate ends a SELECT inside a transaction that then updates the rows
// it read. SQLite has one writer at a time: a transaction that read a row
// cannot commit a write over someone else's newer one (it fails with
// SQLITE_BUSY instead). PostgreSQL runs writers at once (READ COMMITTED), so
// there the SELECT locks its rows until the transaction ends.
func (d dialect) forUpdate() string {
	if d == dialectPostgres {
		return ` FOR UPDATE`
	}
	return ``
}

// isUniqueViolation reports whether err is a UNIQUE (or primary key)
// constraint failure.
func (d dialect) isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" // unique_violation
}

// conn is the database with the dialect applied to every query: the store's
// methods call it as they would call *sql.DB.
type conn struct {
	db *sql.DB
	d  dialect
}

func (c *conn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return c.db.ExecContext(ctx, c.d.rebind(q), c.d.args(args)...)
}

func (c *conn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return c.db.QueryContext(ctx, c.d.rebind(q), c.d.args(args)...)
}

func (c *conn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return c.db.QueryRowContext(ctx, c.d.rebind(q), c.d.args(args)...)
}

func (c *conn) BeginTx(ctx context.Context, opts *sql.TxOptions) (*tx, error) {
	t, err := c.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &tx{tx: t, d: c.d}, nil
}

func (c *conn) Close() error { return c.db.Close() }

// tx is a transaction with the dialect applied.
type tx struct {
	tx *sql.Tx
	d  dialect
}

func (t *tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.d.rebind(q), t.d.args(args)...)
}

func (t *tx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.d.rebind(q), t.d.args(args)...)
}

func (t *tx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.d.rebind(q), t.d.args(args)...)
}

func (t *tx) Commit() error   { return t.tx.Commit() }
func (t *tx) Rollback() error { return t.tx.Rollback() }
