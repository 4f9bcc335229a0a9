%% Shared records of the Throng server.
%%
%% An XML element is the same shape fast_xml uses ({xmlel, Name, Attrs,
%% Children}, {xmlcdata, Bin}), so elements can be compared with fast_xml's in
%% the differential tests. Names and attribute names are kept as written
%% (qualified, with any prefix); xmlns declarations stay ordinary attributes.
-ifndef(THRONG_HRL).
-define(THRONG_HRL, true).

-record(xmlel, {name :: binary(),
                attrs = [] :: [{binary(), binary()}],
                children = [] :: [throng_xml:child()]}).

%% A JID in canonical form: every part already went through stringprep
%% (nodeprep, nameprep, resourceprep). <<>> means "absent".
-record(jid, {user = <<>> :: binary(),
              server = <<>> :: binary(),
              resource = <<>> :: binary()}).

-define(NS_CLIENT, <<"jabber:client">>).
-define(NS_STREAM, <<"http://etherx.jabber.org/streams">>).
-define(NS_STREAM_ERRORS, <<"urn:ietf:params:xml:ns:xmpp-streams">>).
-define(NS_STANZAS, <<"urn:ietf:params:xml:ns:xmpp-stanzas">>).
-define(NS_TLS, <<"urn:ietf:params:xml:ns:xmpp-tls">>).
-define(NS_SASL, <<"urn:ietf:params:xml:ns:xmpp-sasl">>).
-define(NS_SASL_CB, <<"urn:xmpp:sasl-cb:0">>).
-define(NS_SASL2, <<"urn:xmpp:sasl:2">>).
-define(NS_BIND2, <<"urn:xmpp:bind:0">>).
-define(NS_FAST, <<"urn:xmpp:fast:0">>).
-define(NS_BIND, <<"urn:ietf:params:xml:ns:xmpp-bind">>).
-define(NS_SESSION, <<"urn:ietf:params:xml:ns:xmpp-session">>).
-define(NS_ROSTER, <<"jabber:iq:roster">>).
-define(NS_ROSTERVER, <<"urn:xmpp:features:rosterver">>).
-define(NS_PREAPPROVAL, <<"urn:xmpp:features:pre-approval">>).
-define(NS_DISCO_INFO, <<"http://jabber.org/protocol/disco#info">>).
-define(NS_DISCO_ITEMS, <<"http://jabber.org/protocol/disco#items">>).
-define(NS_PING, <<"urn:xmpp:ping">>).
-define(NS_REGISTER, <<"jabber:iq:register">>).
-define(NS_REGISTER_FEATURE, <<"http://jabber.org/features/iq-register">>).
-define(NS_SM, <<"urn:xmpp:sm:3">>).
-define(NS_CSI, <<"urn:xmpp:csi:0">>).
-define(NS_DELAY, <<"urn:xmpp:delay">>).
-define(NS_VERSION, <<"jabber:iq:version">>).

-endif.

-ifndef(THRONG_ROSTER_HRL).
-define(THRONG_ROSTER_HRL, true).
%% One contact in a user's roster (RFC 6121 §2). `ask' records pending
%% subscription requests: `out' = the user asked the contact (None + Pending
%% Out), `in' = the contact asked the user (Pending In), `both' = both.
%% `approved' is a pre-approval (§3.4). Items whose only state is a pending
%% inbound request are kept but hidden from roster results (§3.1.3).
-record(roster_item, {jid :: {binary(), binary()},
                      name = <<>> :: binary(),
                      subscription = none :: throng_roster:subscription(),
                      ask = none :: throng_roster:ask(),
                      approved = false :: boolean(),
                      groups = [] :: [binary()]}).

%% Stored SCRAM credentials (there is no plaintext password anywhere).
-record(scram_creds, {salt :: binary(),
                      iterations :: pos_integer(),
                      sha_stored :: binary(), sha_server :: binary(),
                      sha256_stored :: binary(), sha256_server :: binary()}).

%% A message kept for a user with no available resource.
-record(offline_msg, {timestamp :: integer(),      %% microseconds since the epoch
                      from :: binary(),            %% full JID of the sender
                      packet :: binary()}).        %% the serialized stanza

%% A message in a user's archive (XEP-0313). The id is the time it was
%% archived, in microseconds since the epoch, made unique in the archive
%% (its order is the archive's order); the peer is the other party, as a
%% bare JID and a resource (<<>>: none); the packet is the stanza with its
%% from and to, serialized.
-record(mam_msg, {id :: non_neg_integer(),
                  peer :: {binary(), binary()},
                  packet :: binary()}).

%% Which messages of an archive a query reads: ids from min to max
%% (inclusive), with a peer (any; a bare JID with any resource; a bare JID
%% and one resource), and only those ids when ids is a list.
-define(MAM_MAX_ID, 16#7fffffffffffffff).
-record(mam_filter, {min = 0 :: non_neg_integer(),
                     max = ?MAM_MAX_ID :: non_neg_integer(),
                     with = any :: any | {binary(), any | binary()},
                     ids = any :: any | [non_neg_integer()]}).
-endif.
