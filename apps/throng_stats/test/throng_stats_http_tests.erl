%% @doc Basic authentication of the statistics endpoint.
-module(throng_stats_http_tests).

-include_lib("eunit/include/eunit.hrl").

b64(S) -> "Basic " ++ base64:encode_to_string(S).

no_user_configured_test() ->
    ?assert(throng_stats_http:authorized(undefined, <<>>, <<>>)),
    ?assert(throng_stats_http:authorized("Basic garbage", <<>>, <<>>)).

basic_auth_test() ->
    U = <<"admin">>, P = <<"s3cr:et">>,
    ?assert(throng_stats_http:authorized(b64("admin:s3cr:et"), U, P)),
    ?assertNot(throng_stats_http:authorized(b64("admin:wrong"), U, P)),
    ?assertNot(throng_stats_http:authorized(b64("other:s3cr:et"), U, P)),
    ?assertNot(throng_stats_http:authorized(undefined, U, P)),
    ?assertNot(throng_stats_http:authorized("Bearer abc", U, P)),
    ?assertNot(throng_stats_http:authorized("Basic !!!notbase64", U, P)).
