%% The state of one client connection (throng_c2s and the modules it is
%% split into: throng_c2s_io, throng_c2s_auth, throng_c2s_stanza,
%% throng_c2s_sm). Private to apps/throng/src/c2s/.
-ifndef(THRONG_C2S_HRL).
-define(THRONG_C2S_HRL, true).

-record(d, {sock :: throng_transport:socket() | undefined,
            lref :: throng_listener:ref(),
            parser :: throng_xml_stream:state() | undefined,
            server = <<>> :: binary(),
            stream_id = <<>> :: binary(),
            user :: binary() | undefined,          %% after SASL
            jid :: #jid{} | undefined,             %% after bind
            ip :: inet:ip_address() | undefined,
            sasl :: term(),
            auth_failures = 0 :: non_neg_integer(),
            prio :: undefined | integer(),         %% undefined: not available
            roster = false :: boolean(),           %% the client requested the roster
            directed = [] :: throng_directed:set(), %% directed presence sent to ([]: none)
            tokens = 0 :: integer(),               %% shaper bucket
            tstamp = 0 :: integer(),               %% shaper: last refill (ms)
            last_in = 0 :: integer(),              %% seconds: last data from the client
            sm :: undefined | throng_stream_mgmt:state(),
            out = [] :: iolist(),                  %% pending output, reversed
            paused = false :: boolean(),           %% socket not re-armed on purpose
            csi = active :: active | throng_c2s_csi:queue(), %% XEP-0352: inactive, what is held
            epoch = 0 :: non_neg_integer()}).      %% stream restarts so far: parsed
                                                   %% elements of an older stream are dropped

-define(MAX_AUTH_FAILURES, 5).
-define(ROUTE_BATCH, 64).
%% Whether TCP (the second element of a socket message) is the TCP socket of
%% this session's current socket (throng_transport:tcp_socket/1: a port on
%% the inet driver, a tuple on the socket backend).
-define(OURS(TCP, D), (is_tuple(D#d.sock) andalso element(2, D#d.sock) =:= TCP)).

-type data() :: #d{}.

-endif.
