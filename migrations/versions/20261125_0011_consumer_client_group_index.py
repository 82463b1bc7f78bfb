"""consumer_client: its foreign key to consumer_group on an index of group_id alone, so a
lease renewal no longer waits for a transaction that holds the group row

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 22:00:00.000000

The foreign key used the (group_id, lease_expires_at) index. A renewal rewrites that
index's entry, and InnoDB checks the foreign key again for the new entry, with a shared
lock on the consumer_group row: every renewal of the group waited for any transaction that
had written the group row, such as the leader's assignment (its generation bump) and an
offset reset's landing, for as long as those took. On an index of group_id alone the
renewal changes no index entry of the key and checks nothing. The lease queries look at a
group's few rows through it.

The new index is made first: the foreign key needs an index at every moment, and MySQL and
MariaDB move it to the new one when the old one is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = '0011'
down_revision: str | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index('ix_consumer_client_group_id', 'consumer_client', ['group_id'], unique=False)
    op.drop_index('ix_consumer_client_group_id_lease_expires_at', table_name='consumer_client')


def downgrade() -> None:
    op.create_index('ix_consumer_client_group_id_lease_expires_at', 'consumer_client', ['group_id', 'lease_expires_at'], unique=False)
    op.drop_index('ix_consumer_client_group_id', table_name='consumer_client')
