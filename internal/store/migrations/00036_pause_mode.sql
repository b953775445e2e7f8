-- +goose Up
-- Filesystem-only pauses (issue 26):
--   pause_mode        what the sandbox's pause saved, while it is paused:
--                     'full' (memory, processes, files) or 'filesystem'
--                     (its writable root layer alone; the resume boots fresh)
--   lease_pause_mode  the mode of the pause its lease end does, when
--                     on_lease_end is 'pause'
ALTER TABLE sandboxes ADD COLUMN pause_mode TEXT NOT NULL DEFAULT 'full';
ALTER TABLE sandboxes ADD COLUMN lease_pause_mode TEXT NOT NULL DEFAULT 'full';

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN lease_pause_mode;
ALTER TABLE sandboxes DROP COLUMN pause_mode;
