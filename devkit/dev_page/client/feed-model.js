// What a chat's feed is given and says: the supabase-js client it joins channels with, the
// model it keeps up to date (the package's ChatState, or a frontend's own), its options, and
// the listener it tells what it observes.
export {};
