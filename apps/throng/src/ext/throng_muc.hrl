%% Records of the XEP-0045 service (throng_mod_muc and its throng_muc_*
%% modules). A room's whole state is one #muc{} in its process.

-include("throng.hrl").

-define(NS_MUC, <<"http://jabber.org/protocol/muc">>).
-define(NS_MUC_USER, <<"http://jabber.org/protocol/muc#user">>).
-define(NS_MUC_ADMIN, <<"http://jabber.org/protocol/muc#admin">>).
-define(NS_MUC_OWNER, <<"http://jabber.org/protocol/muc#owner">>).
-define(NS_MUC_CONFIG, <<"http://jabber.org/protocol/muc#roomconfig">>).
-define(NS_MUC_INFO, <<"http://jabber.org/protocol/muc#roominfo">>).
-define(NS_OCCUPANT_ID, <<"urn:xmpp:occupant-id:0">>).
%% XEP-0410 §4: the room answers a self-ping itself (it does not ask the
%% occupant's client), and says so on the room.
-define(NS_MUC_SELF_PING, <<"http://jabber.org/protocol/muc#self-ping-optimization">>).
-define(NS_XDATA, <<"jabber:x:data">>).

%% One occupant: its nick, real full JID, role, its last presence (no
%% from/to, no MUC children) and its XEP-0421 occupant id.
-record(occ, {nick :: binary(),
              jid :: #jid{},
              role :: throng_muc_rules:role(),
              pres :: #xmlel{},
              oid :: binary()}).

%% A room. config: throng_muc_config:config(); affs: affiliations by real
%% bare JID (binary) - absent is none; occs by nick; nicks by real full JID;
%% subject {Text, ByNick}; locked: created and not yet configured (§10.1).
-record(muc, {jid :: #jid{},
              config :: map(),
              affs = #{} :: #{binary() => throng_muc_rules:affiliation()},
              occs = #{} :: #{binary() => #occ{}},
              nicks = #{} :: #{#jid{} => binary()},
              subject = {<<>>, <<>>} :: {binary(), binary()},
              history :: throng_muc_history:history(),
              locked = false :: boolean(),
              secret :: binary(),
              limits :: #{max_users := pos_integer(), history_size := non_neg_integer()}}).
