document.getElementById("handback").submit();
