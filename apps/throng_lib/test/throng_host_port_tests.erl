-module(throng_host_port_tests).
-include_lib("eunit/include/eunit.hrl").

parse_test_() ->
    [?_assertEqual({"10.0.0.1", 5222}, throng_host_port:parse(<<"10.0.0.1:5222">>)),
     ?_assertEqual({"xmpp.example.org", 5301}, throng_host_port:parse(<<"xmpp.example.org:5301">>)),
     ?_assertEqual({"::1", 5222}, throng_host_port:parse(<<"[::1]:5222">>)),
     ?_assertEqual(error, throng_host_port:parse(<<"::1:5222">>)),
     ?_assertEqual(error, throng_host_port:parse(<<"10.0.0.1">>)),
     ?_assertEqual(error, throng_host_port:parse(<<":5222">>)),
     ?_assertEqual(error, throng_host_port:parse(<<"host:0">>)),
     ?_assertEqual(error, throng_host_port:parse(<<"host:65536">>)),
     ?_assertEqual(error, throng_host_port:parse(<<"host:x1">>)),
     ?_assertEqual(error, throng_host_port:parse(<<"[::1]5222">>)),
     ?_assertEqual(error, throng_host_port:parse(<<>>))].
