-- A message's parent is a message of the same chat. The plain foreign key only asked that the
-- parent exist somewhere, so a user writing through the Data API could hang their message under
-- another user's message (and learn from the error whether its id exists).
alter table public.message drop constraint if exists message_id_chat_id_key;
alter table public.message add constraint message_id_chat_id_key unique (id, chat_id);
alter table public.message drop constraint if exists message_parent_same_chat_fkey;
alter table public.message add constraint message_parent_same_chat_fkey
  foreign key (parent_message_id, chat_id) references public.message (id, chat_id)
  on delete set null (parent_message_id);
